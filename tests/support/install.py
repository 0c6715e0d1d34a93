"""Whether the editable install links every module of the repository under hooklatch."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

# Where each part of the one import package lives in the repository (pyproject.toml).
PACKAGE_DIRS = {
    "app": "hooklatch",
    "workers": "hooklatch.workers",
    "migrations": "hooklatch.migrations",
}


def modules_not_installed() -> list[str]:
    """Modules of app/, workers/ and migrations/ that the installed hooklatch lacks.

    The editable install (setuptools' strict mode) links each module under the name
    hooklatch; one added since the last install is not there until it runs again.
    """
    missing = []
    for folder, package in PACKAGE_DIRS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            spec = importlib.util.find_spec(name)
            if spec is None or spec.origin is None or Path(spec.origin).resolve() != path:
                missing.append(name)
    return missing
