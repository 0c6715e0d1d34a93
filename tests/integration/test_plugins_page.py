"""docs/plugins.md says what the contract is: its hooks are the classes' own, with their
types, and its provider whose event id is in a header runs as written, conformance
tests and all."""

import ast
import hashlib
import hmac
import inspect
import re
import subprocess
import sys
import tomllib
import types
from datetime import UTC, datetime

import pytest

import hooklatch.providers.base
from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from tests.support.install import ROOT
from tests.support.plugins import plugin_site

PAGE = ROOT / "docs" / "plugins.md"


def block(language, marker):
    """The one fenced block of ``language`` on the page that contains ``marker``."""
    found = re.findall(rf"^```{language}\n(.*?)^```$", PAGE.read_text(), re.MULTILINE | re.DOTALL)
    [text] = [each for each in found if marker in each]
    return text


def members(node):
    """A class's public attributes and methods, each as its annotation, default, arguments
    and return type read."""
    out: dict[str, tuple[object, ...]] = {}
    for item in node.body:
        if isinstance(item, ast.AnnAssign):
            value = ast.unparse(item.value) if item.value else None
            out[ast.unparse(item.target)] = (ast.unparse(item.annotation), value)
        elif isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
            decorators = [ast.unparse(d) for d in item.decorator_list]
            returns = ast.unparse(item.returns) if item.returns else None
            out[item.name] = (decorators, ast.unparse(item.args), returns)
    return out


def classes(source):
    tree = ast.parse(source)
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def test_the_pages_hooks_and_types_are_the_contracts_own():
    written = classes(block("python", "class Provider:\n    name: ClassVar[str]"))
    declared = classes(inspect.getsource(hooklatch.providers.base))
    assert set(written) == {"Delivery", "IncomingEvent", "HandshakeResponse", "Provider"}
    for name, node in written.items():
        assert members(node) == members(declared[name]), name
        assert [ast.unparse(d) for d in node.decorator_list] == [
            ast.unparse(d) for d in declared[name].decorator_list
        ]


NIMBUS = "class NimbusProvider(Provider):"
NIMBUS_TESTS = "class TestNimbusConformance(ProviderConformance):"
NIMBUS_CONFTEST = "# nimbus's tests"


@pytest.fixture
def nimbus_site(tmp_path):
    """The page's plugin and its entry point, installed as pip would, from the page."""
    entry_points = tomllib.loads(block("toml", "nimbus ="))["project"]["entry-points"]
    registered = [f"{n} = {v}" for n, v in entry_points["hooklatch.providers"].items()]
    return plugin_site(tmp_path / "site", "hooklatch_nimbus", block("python", NIMBUS), *registered)


def run(args, *, cwd, site):
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{ROOT}"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_header_id_provider_passes_the_pages_conformance_tests(tmp_path, nimbus_site):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(block("python", NIMBUS_CONFTEST))
    (tmp_path / "tests" / "test_nimbus.py").write_text(block("python", NIMBUS_TESTS))
    tests = run(
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=tmp_path, site=nimbus_site
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "10 passed" in tests.stdout, tests.stdout
    # Its own sign() and sample_event(), as send-test uses them.
    own = run(["-m", "hooklatch.testing", "nimbus"], cwd=tmp_path, site=nimbus_site)
    assert own.returncode == 0, own.stdout + own.stderr
    assert own.stdout.splitlines()[-1] == "10 passed, 0 failed"


def nimbus():
    module = types.ModuleType("hooklatch_nimbus")
    exec(compile(block("python", NIMBUS), "docs/plugins.md", "exec"), module.__dict__)  # noqa: S102
    return module.NimbusProvider()


def test_the_header_id_provider_signs_its_id_so_id_signed_is_true():
    provider, now = nimbus(), datetime.now(UTC)
    body = b'{"type": "build.finished", "created_at": 1700000000}'
    timestamp = str(int(now.timestamp()))
    signature = hmac.new(
        b"nimbus-secret", f"nev_1.{timestamp}.".encode() + body, hashlib.sha256
    ).hexdigest()
    headers = {
        "x-nimbus-event-id": "nev_1",
        "x-nimbus-timestamp": timestamp,
        "x-nimbus-signature": signature,
    }
    delivery = Delivery("POST", "https://h.example/hooks/ep", headers, body)
    provider.verify(delivery, secrets=["nimbus-secret"], now=now)
    [event] = provider.parse(delivery)
    assert (event.external_id, event.type, event.id_signed) == ("nev_1", "build.finished", True)
    assert event.occurred_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)

    # The signature covers the id: the same request under another id does not verify.
    relabelled = Delivery("POST", delivery.url, {**headers, "x-nimbus-event-id": "nev_2"}, body)
    with pytest.raises(VerificationError) as refused:
        provider.verify(relabelled, secrets=["nimbus-secret"], now=now)
    assert refused.value.reason == "bad_signature"
