"""The install targets run again only when what they install from changed, as make itself
answers (`make --question`): pyproject.toml, a lock file, or the package's list of files
(a new module needs its link in the editable install). Otherwise `make run` starts at once.

Each test runs the repository's Makefile in a folder of its own, with stand-in files and
a virtualenv whose pip only writes down what it was asked to install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.install import ROOT

LOCKS = ("main", "dev", "bench", "fast")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for name in (
        "pyproject.toml",
        "app/__init__.py",
        "app/admin/templates/console/base.html",
        "workers/__init__.py",
        "migrations/env.py",
        *(f"requirements/{lock}.txt" for lock in LOCKS),
        ".venv/bin/python",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    pip = tmp_path / ".venv" / "bin" / "pip"
    pip.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "pip.log"}\n')
    pip.chmod(0o755)
    make(tmp_path, "install-dev")
    asked = installs(tmp_path)
    assert "--require-hashes --no-deps -r requirements/dev.txt" in asked
    assert "-e ." in asked
    return tmp_path


def installs(tree: Path) -> str:
    """What pip was asked to install since the last call."""
    log = tree / "pip.log"
    asked = log.read_text() if log.exists() else ""
    log.unlink(missing_ok=True)
    return asked


def make(tree: Path, *args: str) -> int:
    done = subprocess.run(
        ["make", "--no-print-directory", *args], cwd=tree, capture_output=True, timeout=60
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode


def up_to_date(tree: Path, target: str) -> bool:
    return make(tree, "--question", target) == 0


def newer(path: Path) -> None:
    """``path`` changed after the installs (later than any file made so far)."""
    later = time.time() + 10
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    os.utime(path, (later, later))


def test_nothing_changed_since_a_dev_install_so_no_install_is_due(tree):
    assert up_to_date(tree, "install-dev")
    assert up_to_date(tree, "install")  # make run's: the dev lock holds main's packages
    make(tree, "install-dev")
    make(tree, "install")
    assert installs(tree) == ""


def test_a_new_module_is_linked_by_the_next_install(tree):
    newer(tree / "app" / "new_module.py")
    make(tree, "install")
    assert "-e ." in installs(tree)
    assert up_to_date(tree, "install")


def test_an_edited_module_needs_no_install(tree):
    newer(tree / "app" / "__init__.py")
    newer(tree / "app" / "admin" / "templates" / "console" / "base.html")
    assert up_to_date(tree, "install-dev")


@pytest.mark.parametrize(
    "added", ["app/ingest/new_module.py", "workers/relay/new.py", "app/static/new.css"]
)
def test_a_new_file_in_the_package_needs_an_install_for_its_link(tree, added):
    newer(tree / added)
    assert not up_to_date(tree, "install-dev")
    assert not up_to_date(tree, "install")


def test_a_removed_module_needs_an_install(tree):
    (tree / "migrations" / "env.py").unlink()
    assert not up_to_date(tree, "install-dev")


def test_a_changed_pyproject_needs_every_install(tree):
    newer(tree / "pyproject.toml")
    assert not up_to_date(tree, "install-dev")
    assert not up_to_date(tree, "install")


def test_a_changed_lock_file_needs_the_installs_it_feeds(tree):
    newer(tree / "requirements" / "dev.txt")
    assert not up_to_date(tree, "install-dev")
    assert up_to_date(tree, "install")
    newer(tree / "requirements" / "fast.txt")
    assert not up_to_date(tree, "install")


def test_bytecode_beside_the_modules_needs_no_install(tree):
    newer(tree / "app" / "__pycache__" / "__init__.cpython-311.pyc")
    assert up_to_date(tree, "install-dev")


def _recipes() -> dict[str, str]:
    """The repository Makefile's rules: each target's recipe lines, joined."""
    rules: dict[str, str] = {}
    target = None
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("\t") and target is not None:
            rules[target] += line.strip() + "\n"
        elif match := re.match(r"^([\w-]+):", line):
            target = match.group(1)
            rules[target] = ""
        elif not line.startswith("\t"):
            target = None
    return rules


def _smoked() -> set[str]:
    """The modules `make bench-smoke` runs with --smoke."""
    return set(re.findall(r"-m (bench(?:\.\w+)?) --smoke", _recipes()["bench-smoke"]))


def test_every_bench_scenario_with_a_smoke_mode_runs_in_bench_smoke():
    """A scenario module run by another (bench.hostile runs bench.flood) is covered by it."""
    smoked = _smoked()
    read = {name: (ROOT / "bench" / f"{name.removeprefix('bench.')}.py") for name in smoked}
    texts = " ".join(path.read_text() for name, path in read.items() if name != "bench")
    for path in (ROOT / "bench").glob("*.py"):
        if '"--smoke"' not in path.read_text() or path.stem == "__main__":
            continue
        module = f"bench.{path.stem}"
        assert module in smoked or re.search(rf"from bench import .*\b{path.stem}\b", texts), (
            f"{module} has a smoke mode that make bench-smoke does not run"
        )
    assert "bench.forwarding" in smoked


def test_each_scenario_bench_smoke_runs_has_a_target_of_its_own():
    recipes = _recipes()
    for module in _smoked() - {"bench"}:
        runs = [
            t for t, recipe in recipes.items() if re.search(rf"-m {module}(?! --smoke)", recipe)
        ]
        assert runs == [f"bench-{module.removeprefix('bench.').replace('_', '-')}"], module
