"""docs/configuration.md is made from hooklatch.settings_reference, and that table names
exactly the environment variables the code reads: one read nowhere described, or a row
that nothing reads, fails here."""

import ast
import re
from pathlib import Path

import pytest

from hooklatch import settings_reference
from hooklatch.settings import Settings
from tests.support.install import ROOT

PAGE = ROOT / "docs" / "configuration.md"
REMAKE = "make docs (or: python -m hooklatch.settings_reference docs/configuration.md)"
# Typed readers (app/settings_values.py) that read a variable: read_int(env, "NAME", default).
READERS = {"read_int", "read_float", "read_flag"}


def sources():
    yield ROOT / "gunicorn.conf.py"
    for folder in ("app", "workers"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def _is_environment(node: ast.expr) -> bool:
    """os.environ, the `env` settings.py reads from, or an expression choosing os.environ
    (`os.environ if environ is None else environ`). A WSGI `environ` is not one."""
    if isinstance(node, ast.Name):
        return node.id == "env"
    return "os.environ" in ast.unparse(node)


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level NAME = "TEXT" assignments: names that hold a variable's name."""
    found = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
            for target in statement.targets:
                if isinstance(target, ast.Name) and isinstance(statement.value.value, str):
                    found[target.id] = statement.value.value
    return found


def _keys(node: ast.AST) -> list[ast.expr]:
    """The expressions that name an environment variable this node reads or sets."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault"):
            return node.args[:1] if _is_environment(func.value) else []
        if isinstance(func, ast.Attribute) and func.attr == "getenv":
            return node.args[:1]
        if isinstance(func, ast.Name) and func.id in READERS and len(node.args) > 1:
            return [node.args[1]]
    if isinstance(node, ast.Subscript) and _is_environment(node.value):
        return [node.slice]
    # `"NAME" in os.environ`, not `"text" in os.environ.get("NAME", "")`.
    if isinstance(node, ast.Compare) and any(isinstance(op, ast.In) for op in node.ops):
        mappings = [r for r in node.comparators if not isinstance(r, ast.Call)]
        return [node.left] if any(_is_environment(r) for r in mappings) else []
    return []


def variables_read() -> dict[str, set[str]]:
    """Each environment variable the shipped code reads, with the files that read it."""
    read: dict[str, set[str]] = {}
    for path in sources():
        tree = ast.parse(path.read_text(), filename=str(path))
        constants = _constants(tree)
        for node in ast.walk(tree):
            for key in _keys(node):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    name = key.value
                elif isinstance(key, ast.Name) and key.id in constants:
                    name = constants[key.id]
                else:
                    continue  # a helper's parameter: its callers are read instead
                read.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return read


def test_the_committed_configuration_page_is_the_generated_one():
    assert PAGE.read_text() == settings_reference.page(), (
        f"{PAGE.relative_to(ROOT)} differs from app/settings_reference.py: run {REMAKE} "
        "and commit the page"
    )


def test_every_variable_the_code_reads_is_described():
    described = {setting.name for setting in settings_reference.SETTINGS}
    missing = {name: files for name, files in variables_read().items() if name not in described}
    assert not missing, "\n".join(
        f"{name} is read by {', '.join(sorted(files))} but not described: add a "
        f'Setting("{name}", default, meaning) row to a section of app/settings_reference.py, '
        f"then run {REMAKE}"
        for name, files in sorted(missing.items())
    )


def test_every_described_variable_is_read_somewhere():
    read = variables_read()
    unread = [s.name for s in settings_reference.SETTINGS if s.name not in read]
    assert not unread, (
        f"app/settings_reference.py describes {', '.join(unread)}, which nothing in app/, "
        f"workers/ or gunicorn.conf.py reads: remove the row (or read it), then run {REMAKE}"
    )


def test_each_variable_is_described_once():
    names = [setting.name for setting in settings_reference.SETTINGS]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_the_scan_finds_each_way_a_variable_is_read():
    # One of each shape the scan must see: a helper, .get, a subscript, `in`, a constant.
    read = variables_read()
    assert "app/settings.py" in read["HOOKLATCH_MAX_ATTEMPTS"]  # read_int(env, ...)
    assert "app/settings.py" in read["DATABASE_URL"]  # env.get(...)
    assert "app/settings.py" in read["HOOKLATCH_TRUSTED_PROXIES"]  # env[...], ... in env
    assert "app/gunicorn_config.py" in read["WEB_CONCURRENCY"]  # os.environ.get
    assert "app/logs.py" in read["HOOKLATCH_LOG_FORMAT"]  # through a module constant
    assert "REQUEST_METHOD" not in read  # a WSGI environ, not the process's


def test_a_table_cell_cannot_break_the_table(tmp_path: Path):
    with pytest.raises(ValueError, match="table cell"):
        settings_reference._cell("a | b")
    written = tmp_path / "configuration.md"
    assert settings_reference.main([str(written)]) == 0
    assert written.read_text() == settings_reference.page()


def _shown(value: object) -> str:
    """A default as the reference writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, Path):
        return f"./{value.relative_to(Path.cwd())}"
    return str(value)


def settings_fields() -> dict[str, str]:
    """Each variable Settings.from_env reads into a field of its own, with that field."""
    tree = ast.parse((ROOT / "app" / "settings.py").read_text())
    [from_env] = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "from_env"
    ]
    fields = {}
    for node in ast.walk(from_env):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cls":
            for keyword in node.keywords:
                names = {
                    key.value
                    for sub in ast.walk(keyword.value)
                    for key in _keys(sub)
                    if isinstance(key, ast.Constant) and isinstance(key.value, str)
                }
                if len(names) == 1 and keyword.arg:
                    fields[names.pop()] = keyword.arg
    return fields


def test_each_default_shown_is_the_one_settings_uses():
    defaults = Settings()
    fields = settings_fields()
    assert len(fields) > 40
    wrong = []
    for setting in settings_reference.SETTINGS:
        shown = re.match(r"`([^`]*)`", setting.default)
        if setting.name in fields and shown:
            actual = getattr(defaults, fields[setting.name])
            if shown[1] != _shown(actual):
                wrong.append(f"{setting.name}: shown {shown[1]!r}, Settings has {actual!r}")
    assert wrong == [], f"fix app/settings_reference.py, then run {REMAKE}: {wrong}"
