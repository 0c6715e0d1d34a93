"""gunicorn's working directory on the import path (hooklatch.handler_modules'
put_server_directory_last): last, and gone when the handler modules are looked for,
unless the user named it."""

from __future__ import annotations

import sys

import pytest

from hooklatch import handler_modules
from hooklatch.handler_modules import import_handler_modules, put_server_directory_last


@pytest.fixture
def path(monkeypatch, tmp_path):
    """An import path with gunicorn's working directory first, as gunicorn leaves it."""
    monkeypatch.setattr(handler_modules, "_server_entries", [])
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    return tmp_path


def test_the_servers_directory_goes_last_and_off_when_handlers_are_looked_for(path):
    put_server_directory_last(str(path))
    assert sys.path[-1] == str(path) and sys.path.count(str(path)) == 1
    import_handler_modules([], [])
    assert str(path) not in sys.path


def test_the_servers_directory_stays_first_when_pythonpath_names_it(path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(path))
    put_server_directory_last(str(path))
    import_handler_modules([], [])
    assert sys.path[0] == str(path)


def test_a_pythonpath_option_naming_it_puts_it_back_first(path):
    """gunicorn reads --pythonpath after its settings module has moved the directory."""
    put_server_directory_last(str(path))
    put_server_directory_last(str(path), named=[str(path / ".")])
    import_handler_modules([], [])
    assert sys.path[0] == str(path)
