"""Handlers and plugins written against the old import paths (`app`, `workers`) fail at
start with a message that names the import to write, not with a bare ImportError."""

import subprocess
import sys

import pytest

HANDLERS = "from app.handlers import on\n\n@on('stripe', '*')\ndef handle(event, ctx):\n    pass\n"
PLUGIN = (
    "from app.providers.base import IncomingEvent, Provider\n\nclass Acme(Provider):\n    pass\n"
)


def run_hooklatch(tmp_path, *, handlers="", plugin=False, user_app=False):
    """`hooklatch providers` (which loads handlers and plugins as every process does) in a
    project folder of its own; the checkout itself is not on the path."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "old_handlers.py").write_text(HANDLERS)
    (project / "mine.py").write_text("from app.models import Invoice\n")
    if user_app:  # the user's own Flask app, as Flask's tutorial lays it out
        (project / "app").mkdir()
        (project / "app" / "__init__.py").write_text("def create_app():\n    return None\n")
    if plugin:
        (project / "acme_hooks.py").write_text(PLUGIN)
        dist = project / "acme_hooks-0.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-hooks\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text("[hooklatch.providers]\nacme = acme_hooks:Acme\n")
    return subprocess.run(
        [sys.executable, "-m", "hooklatch", "providers"],
        cwd=project,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(project),
            "HOOKLATCH_INSTANCE_PATH": str(tmp_path / "instance"),
            "HOOKLATCH_HANDLERS": handlers,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("user_app", [False, True], ids=["no-app-package", "users-own-app"])
def test_a_handler_module_importing_app_handlers_is_told_the_new_import(tmp_path, user_app):
    result = run_hooklatch(tmp_path, handlers="old_handlers", user_app=user_app)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "HOOKLATCH_HANDLERS: module 'old_handlers' failed to import" in result.stderr
    assert (
        "write `from hooklatch import on` instead of `from app.handlers import on`" in result.stderr
    ), result.stderr
    assert "Traceback" not in result.stderr


def test_a_plugin_importing_app_providers_is_told_the_new_import(tmp_path):
    result = run_hooklatch(tmp_path, plugin=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "provider plugin 'acme = acme_hooks:Acme' failed to import" in result.stderr
    assert (
        "write `from hooklatch.providers import IncomingEvent, Provider` instead of "
        "`from app.providers.base import IncomingEvent, Provider`" in result.stderr
    ), result.stderr


def test_an_import_of_the_users_own_module_gets_no_advice(tmp_path):
    """hooklatch has no `Invoice`: a failing `from app.models import Invoice` is the user's
    own module, and the message is the plain error."""
    result = run_hooklatch(tmp_path, handlers="mine", user_app=True)
    assert result.returncode == 1
    assert "No module named 'app.models'" in result.stderr
    assert "hooklatch is imported as" not in result.stderr
