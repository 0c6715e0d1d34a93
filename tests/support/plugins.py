"""A provider plugin installed the way pip installs one: a module and a distribution whose
entry points register it, in a folder of its own that goes on PYTHONPATH."""

from pathlib import Path


def plugin_site(site: Path, module: str, source: str, *entry_points: str) -> Path:
    """Write ``module``.py with ``source`` into ``site``, registered under
    ``hooklatch.providers`` by ``entry_points`` (``"name = module:Class"``)."""
    dist = site / f"{module}-0.1.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(source)
    name = module.replace("_", "-")
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "\n".join(entry_points)
    (dist / "entry_points.txt").write_text(f"[hooklatch.providers]\n{lines}\n")
    return site
