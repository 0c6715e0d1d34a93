"""Importing the modules HOOKLATCH_HANDLERS names, from the folders HOOKLATCH_HANDLERS_PATH
names (by default the working directory), as ``rq worker --path`` and ``uvicorn
--app-dir`` find an application's code. Every process does it here, once, while its
runtime is built (hooklatch.assembly.build_runtime): web, relay, worker (whose work
horses inherit it) and the CLI's commands.

The folders go at the end of ``sys.path``, after the standard library and the installed
packages: a module of the project's that happens to share a name with one of them
(``logging.py``, ``redis.py``, ``stripe.py``) never replaces what hooklatch, its
libraries or another handler imports under that name, whichever was imported first. A
handler module is therefore found in the folders only under a name nothing installed
has; one that is hidden by an installed module of its name stops the process, saying so,
rather than leaving its handlers unregistered.

The web process under gunicorn too: gunicorn puts its working directory first on the
import path, which its settings module (hooklatch.gunicorn_config) moves last, and
``import_handler_modules`` takes off, with put_server_directory_last. Only what PYTHONPATH
or gunicorn's ``--pythonpath`` names comes first: the user's choice. Nothing here imports
gunicorn; its settings module turns a HandlerModuleNotFound into gunicorn's error.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path

SETTING = "HOOKLATCH_HANDLERS"
PATH_SETTING = "HOOKLATCH_HANDLERS_PATH"

# Entries a server put on the import path for itself (see put_server_directory_last),
# taken off when the handler modules are looked for.
_server_entries: list[str] = []


class HandlerImportError(RuntimeError):
    """A handler module failed while it was imported: an error of its own, shown with its
    traceback (``details``) after this line."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


class HandlerModuleNotFound(HandlerImportError):
    """No module of that name where it was looked for: one line, no traceback. A gunicorn
    worker raises it as gunicorn's AppImportError, for which the worker prints the line
    and the server stops (hooklatch.gunicorn_config's post_fork)."""


def import_handler_modules(modules: Iterable[str], folders: Sequence[Path]) -> None:
    """Import each of ``modules`` (their ``@on`` handlers register as they are imported),
    from ``folders`` or the installed packages."""
    from hooklatch.renamed import hint

    for entry in _server_entries:
        while entry in sys.path:
            sys.path.remove(entry)
    _server_entries.clear()
    add_to_path(folders)
    for module in modules:
        _check_not_hidden(module, folders)
        try:
            importlib.import_module(module)
        except Exception as exc:
            if isinstance(exc, ModuleNotFoundError) and _is_module_itself(exc.name, module):
                raise HandlerModuleNotFound(_not_found(module, folders)) from None
            advice = hint(exc)
            message = f"{SETTING}: module {module!r} failed to import: {exc}{advice}"
            # Advice on an old import says all there is to say; anything else is a bug
            # in the module, whose traceback shows where.
            raise HandlerImportError(message, "" if advice else _traceback(exc)) from exc


def add_to_path(folders: Sequence[Path]) -> None:
    """Put ``folders`` at the end of the import path (this module's docstring says why)."""
    for folder in folders:
        entry = os.fspath(folder)
        if entry not in sys.path:
            sys.path.append(entry)


def put_server_directory_last(directory: str, *, named: Iterable[str] = ()) -> None:
    """gunicorn puts the folder it runs in first on the import path, to import the
    application's module from it (``wsgi`` of ``gunicorn wsgi:app``): the project's
    modules would come before the standard library and the installed packages. Moved to
    the end, it still serves that import (nothing installed is called ``wsgi``) and hides
    nothing; and it is taken off when the handler modules are looked for, which look in
    the folders HOOKLATCH_HANDLERS_PATH names only.

    Left first when PYTHONPATH or ``named`` (gunicorn's ``--pythonpath``) names it: a
    choice of the user's, which this puts back first if it was moved before it was known."""
    target = os.path.realpath(directory)
    present = [entry for entry in sys.path if os.path.realpath(entry) == target]
    if not present:
        return
    chosen = [*os.environ.get("PYTHONPATH", "").split(os.pathsep), *named]
    if any(entry and os.path.realpath(entry) == target for entry in chosen):
        if directory in _server_entries:
            _server_entries.remove(directory)
            sys.path.remove(directory)
            sys.path.insert(0, directory)
        return
    for entry in present:
        sys.path.remove(entry)
    sys.path.append(directory)
    if directory not in _server_entries:
        _server_entries.append(directory)


def _is_module_itself(missing: str | None, module: str) -> bool:
    """Whether the module not found is ``module`` or a package it is in, rather than
    something ``module`` imports."""
    return missing is not None and (missing == module or module.startswith(missing + "."))


def _not_found(module: str, folders: Sequence[Path]) -> str:
    if folders:
        looked = ", ".join(
            os.fspath(folder) + ("" if folder.is_dir() else " (no such folder)")
            for folder in folders
        )
        where = f"in {looked} ({PATH_SETTING}) or in the installed packages"
    else:
        where = f"in the installed packages ({PATH_SETTING} is empty)"
    return f"{SETTING}: module {module!r} not found {where}"


def _check_not_hidden(module: str, folders: Sequence[Path]) -> None:
    """Stop when a folder holds the module's top-level package or file but the import
    system would find another of the same name first (an installed one)."""
    top = module.partition(".")[0]
    ours = [
        candidate
        for folder in folders
        for candidate in (folder / f"{top}.py", folder / top / "__init__.py")
        if candidate.is_file()
    ]
    if not ours:
        return
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return  # the import itself says what is wrong
    origin = spec.origin if spec is not None else None
    if origin is None or any(_same_file(origin, candidate) for candidate in ours):
        return
    raise HandlerModuleNotFound(
        f"{SETTING}: module {top!r} is {origin}, not {ours[0]}: an installed module of that "
        f"name comes first on the import path; rename yours (or set {PATH_SETTING} to an "
        "empty value to use the installed one)"
    )


def _same_file(origin: str, candidate: Path) -> bool:
    try:
        return Path(origin).resolve() == candidate.resolve()
    except OSError:
        return False


def _traceback(exc: BaseException) -> str:
    """The error's traceback without the import machinery's frames: from the first line of
    the handler module's own that ran."""
    shown = traceback.TracebackException.from_exception(exc)
    kept = [
        frame
        for frame in shown.stack
        if not frame.filename.startswith("<frozen importlib")
        and frame.filename != importlib.__file__
        and frame.filename != __file__
    ]
    shown.stack = traceback.StackSummary.from_list(kept)
    return "".join(shown.format()).rstrip("\n")
