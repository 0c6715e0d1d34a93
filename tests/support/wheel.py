"""hooklatch's wheel, built from the working tree, and virtualenvs that install it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from tests.support.install import ROOT


def build_wheel(tmp_path: Path) -> Path:
    """A wheel of the working tree (tracked and new files), built from a copy of it so
    that nothing stale from an earlier build can slip in."""
    source = tmp_path / "source"
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    out = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = out.glob("hooklatch-*.whl")
    build_log(wheel).write_text(built.stdout + built.stderr)
    return wheel


def build_log(wheel: Path) -> Path:
    """What building ``wheel`` printed."""
    return wheel.parent / "build.log"


def metadata(wheel: Path) -> dict[str, list[str]]:
    """The wheel's METADATA fields, each with every value it has."""
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        message = Parser().parsestr(archive.read(name).decode())
    fields: dict[str, list[str]] = {}
    for key, value in message.items():
        fields.setdefault(key, []).append(value)
    return fields


def requirements(wheel: Path) -> list[str]:
    """What installing the wheel without extras asks for (its Requires-Dist)."""
    return [
        requirement
        for requirement in metadata(wheel).get("Requires-Dist", [])
        if "extra ==" not in requirement
    ]
