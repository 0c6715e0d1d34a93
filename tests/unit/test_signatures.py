"""Signatures say what they take: a parameter or return annotated with a bare ``Any`` is
allowed in a few places only (each found here), and none in the packages mypy checks
strictly (the worker and relay, ingest, the provider plugins, their conformance kit),
whose strict block in pyproject.toml names both their folder and installed names."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

from tests.support.install import ROOT

STRICT = ("workers", "app/ingest", "app/providers", "app/testing")
# The whole package may keep this many, where a signature forwards what it does not
# read (a proxy's __getattr__).
MOST = 20
# The options `mypy --strict` turns on that can be set for some modules only.
STRICT_OPTIONS = {
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "disallow_any_generics",
    "disallow_untyped_calls",
    "disallow_subclassing_any",
    "disallow_untyped_decorators",
    "warn_return_any",
    "no_implicit_reexport",
    "strict_equality",
    "extra_checks",
}


def _is_any(annotation: ast.expr | None) -> bool:
    match annotation:
        case ast.Name(id="Any") | ast.Attribute(attr="Any") | ast.Constant(value="Any"):
            return True
    return False


def bare_any(folder: Path) -> Iterator[str]:
    """``path:line name`` (path within ``folder``) of each function with a bare Any in its
    signature."""
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = node.args
            annotations = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            annotations += [a.annotation for a in (args.vararg, args.kwarg) if a is not None]
            if any(_is_any(a) for a in (*annotations, node.returns)):
                yield f"{path.relative_to(folder)}:{node.lineno} {node.name}"


def test_the_finder_sees_each_place_a_bare_any_can_stand(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import typing\nfrom typing import Any\n"
        "def a(x: Any) -> int: ...\n"
        "def b(*args: Any) -> None: ...\n"
        "def c(**kw: 'Any') -> None: ...\n"
        "async def d() -> typing.Any: ...\n"
        "def e(*, y: Any = 1) -> None: ...\n"
        "def fine(x: dict[str, Any], y: list[Any]) -> object: ...\n"
    )
    found = [place.split()[-1] for place in bare_any(tmp_path)]
    assert found == ["a", "b", "c", "d", "e"]


def test_no_bare_any_in_the_strictly_typed_packages() -> None:
    found = [place for folder in STRICT for place in bare_any(ROOT / folder)]
    assert found == []


def test_few_bare_any_anywhere() -> None:
    found = [*bare_any(ROOT / "app"), *bare_any(ROOT / "workers")]
    assert len(found) <= MOST, "\n".join(found)


def test_mypy_checks_those_packages_strictly_under_both_their_names() -> None:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [o for o in mypy["overrides"] if o.keys() >= STRICT_OPTIONS]
    assert len(strict) == 1
    assert all(strict[0][option] is True for option in STRICT_OPTIONS)
    assert set(strict[0]["module"]) >= {
        "workers.*",
        "hooklatch.workers.*",
        "app.ingest.*",
        "hooklatch.ingest.*",
        "app.providers.*",
        "hooklatch.providers.*",
        "app.testing.*",
        "hooklatch.testing.*",
    }
