"""hooklatch installs as one import package: the folders map under it, and no code imports
them by their folder names (which would load a second copy, or a user's own `app`)."""

import ast
import tomllib
from pathlib import Path

from tests.support.install import PACKAGE_DIRS, ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FOLDER_NAMES = {"app", "workers", "migrations"}


def test_the_package_dirs_are_the_ones_pyproject_maps():
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {
        package: folder for folder, package in PACKAGE_DIRS.items()
    }


def test_every_package_folder_is_listed_for_the_wheel():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = {
        ".".join((package, *init.parent.relative_to(ROOT / folder).parts))
        for folder, package in PACKAGE_DIRS.items()
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert found == listed


def sources():
    for folder in ("app", "workers", "migrations", "tests", "bench", "examples"):
        yield from sorted((ROOT / folder).rglob("*.py"))
    yield ROOT / "wsgi.py"


def test_nothing_imports_the_folders_by_their_own_names():
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sources()
        for name in imported_modules(path)
        if name.split(".")[0] in FOLDER_NAMES
    ]
    assert offenders == []


def imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_the_public_names_are_seen_by_dir_and_type_checkers_and_no_other(tmp_path):
    """``import hooklatch`` loads its public names when first used; ``dir()`` lists them
    before that, and a type checker refuses a name hooklatch does not have."""
    import subprocess
    import sys

    listed = subprocess.run(
        [sys.executable, "-c", "import hooklatch; print(' '.join(dir(hooklatch)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert {"Context", "EventView", "Router", "Settings", "create_app", "on"} <= set(listed)
    user = tmp_path / "handlers_of_a_user.py"
    user.write_text("from hooklatch import Context, on\nfrom hooklatch import Contxt\n")
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", str(user)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert checked.returncode == 1, checked.stdout
    assert 'has no attribute "Contxt"' in checked.stdout
    assert checked.stdout.count("error:") == 1, checked.stdout
