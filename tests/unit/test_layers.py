"""The layers of pyproject's import-linter contracts hold, and an import against them
fails lint: each case copies the package as it installs (app/ as hooklatch, workers/
and migrations/ inside it), adds one import that runs up a layer, between relay and
worker, or a module the contracts do not place, and runs lint-imports on the copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.install import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package laid out as installed, under a folder of its own."""
    top = tmp_path_factory.mktemp("layers")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "app", top / "hooklatch", ignore=skip)
    shutil.copytree(ROOT / "workers", top / "hooklatch" / "workers", ignore=skip)
    shutil.copytree(ROOT / "migrations", top / "hooklatch" / "migrations", ignore=skip)
    return top


def lint_imports(top: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(top)}
    return subprocess.run(
        [str(LINT_IMPORTS), str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=top,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_make_lint_checks_the_contracts() -> None:
    lint = (ROOT / "Makefile").read_text().split("\nlint: ", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/lint-imports" in lint


def test_the_package_keeps_its_layers(package: Path) -> None:
    result = lint_imports(package)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def layer_of(module: str) -> str:
    """The name lint-imports gives a module's layer: hooklatch.events for
    hooklatch.events.models, hooklatch.workers.relay for hooklatch.workers.relay.loop."""
    parts = module.split(".")
    return ".".join(parts[: 3 if parts[1] == "workers" else 2])


@pytest.mark.parametrize(
    ("path", "imported"),
    [
        ("events/models.py", "hooklatch.admin.views"),  # a domain reaching a face
        ("audit.py", "hooklatch.events.models"),  # the kernel reaching a domain
        ("endpoints/service.py", "hooklatch.ordering.claims"),  # a lower domain, a higher one
        ("runtime.py", "hooklatch.ingest.views"),  # the runtime reaching a process body
        ("workers/relay/loop.py", "hooklatch.workers.worker.jobs"),  # relay and worker,
        ("workers/worker/jobs.py", "hooklatch.workers.relay.loop"),  # both ways
    ],
)
def test_an_import_against_the_layers_fails_lint(package: Path, path: str, imported: str) -> None:
    module = "hooklatch." + path.removesuffix(".py").replace("/", ".")
    source = package / "hooklatch" / path
    before = source.read_text()
    source.write_text(f"{before}\nimport {imported}  # noqa: E402\n")
    try:
        result = lint_imports(package)
    finally:
        source.write_text(before)
    assert result.returncode == 1, result.stdout + result.stderr
    said = f"{layer_of(module)} is not allowed to import {layer_of(imported)}"
    assert said in result.stdout
    assert f"{module} -> {imported}" in result.stdout


@pytest.mark.parametrize("where", ["hooklatch/unplaced.py", "hooklatch/workers/unplaced.py"])
def test_a_module_the_layers_do_not_place_fails_lint(package: Path, where: str) -> None:
    path = package / where
    path.write_text('"""Nowhere in the layers."""\n')
    try:
        result = lint_imports(package)
    finally:
        path.unlink()
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not listed as layers" in result.stdout
    assert where.removesuffix(".py").replace("/", ".") in result.stdout
