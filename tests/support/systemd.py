"""deploy/systemd's units as `systemd-analyze verify` sees them, pointed at this checkout's
virtualenv instead of /opt/hooklatch (verify refuses a unit whose programs are missing)."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

from tests.support.install import ROOT
from tests.support.tools import needed_tool

UNITS = ROOT / "deploy" / "systemd"
INSTALLED_BIN = "/opt/hooklatch/bin"


def systemd_analyze() -> str:
    return needed_tool("systemd-analyze", apt="systemd")


def local_copies(into: Path) -> list[Path]:
    """Every unit, copied into ``into`` with its programs at this virtualenv's paths."""
    into.mkdir(parents=True, exist_ok=True)
    here = str(Path(sys.executable).parent)
    copies = []
    for unit in sorted(UNITS.iterdir()):
        copy = into / unit.name
        copy.write_text(unit.read_text().replace(INSTALLED_BIN, here))
        copies.append(copy)
    return copies


def verify(unit: Path) -> tuple[int, str]:
    """``systemd-analyze verify``'s exit status and what it said. It exits 0 on an unknown
    key or a value it cannot parse (it only warns, and ignores the line): a unit passes
    only if it says nothing at all."""
    done = subprocess.run(
        [systemd_analyze(), "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=unit.parent,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def directives(unit: Path) -> configparser.RawConfigParser:
    """The unit's sections and keys (a key given twice keeps its last value)."""
    parser = configparser.RawConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(unit.read_text())
    return parser
