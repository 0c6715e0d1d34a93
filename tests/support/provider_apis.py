"""The CLI against Stripe's and GitHub's local API servers, with the app served where they
deliver: what the provider-side commands' tests share."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from click.testing import Result
from sqlalchemy import select

from hooklatch.audit import AuditEntry
from hooklatch.display import shown_time
from hooklatch.runtime import Runtime
from hooklatch.settings import Settings
from tests.support.cli import run_cli
from tests.support.fake_github import FakeGitHub
from tests.support.fake_stripe import FakeStripe

# A restricted key that can read events and write webhook endpoints, and a GitHub token
# that can write hooks: what the docs tell a user to make.
STRIPE_KEY = "rk_test_51HcliRestrictedKeyQ7xZ"
GITHUB_TOKEN = "github_pat_11CLITEST0abcdefghijklmnopqrstuvwxyz"
SCOPE = "repos/octo-org/widgets"


@dataclass
class Cli:
    """`hooklatch` with endpoints' URLs on the served app."""

    settings: Settings
    public_url: str

    def __call__(self, *args: str, ok: bool = True, input: str | None = None) -> Result:
        return run_cli(self.settings, *args, ok=ok, input=input, public_url=self.public_url)

    def json(self, *args: str) -> dict:
        return json.loads(self(*args, "--json").stdout)


def credential_file(folder: Path, text: str) -> str:
    path = folder / f"credential-{abs(hash(text))}"
    path.write_text(text)
    return str(path)


def stored_nowhere(runtime: Runtime, secrets: Iterable[str], *places: str) -> None:
    """No secret in any of ``places`` (outputs, logs) nor in any audit row."""
    with runtime.session_factory() as session:
        rows = session.scalars(select(AuditEntry))
        audit = [json.dumps([a.actor, a.action, a.target, a.details]) for a in rows]
    for secret in secrets:
        assert secret
        for text in (*places, *audit):
            assert secret not in text


def add_stripe(
    cli: Cli,
    stripe_api: FakeStripe,
    stripe_key: str,
    *more: str,
    types: Sequence[str] = ("invoice.paid", "customer.created"),
) -> Result:
    """`endpoints add stripe --name billing --register` with the key in ``stripe_key``."""
    args = ["endpoints", "add", "stripe", "--name", "billing", "--register", *more]
    args += ["--api-url", stripe_api.url, "--credential-file", stripe_key]
    for event_type in types:
        args += ["--event-type", event_type]
    return cli(*args)


def add_github(cli: Cli, github_api: FakeGitHub) -> Result:
    """`endpoints add github --name repo --register` for push and issues, the token typed
    at the hidden prompt."""
    return cli(
        "endpoints", "add", "github", "--name", "repo", "--register", "--scope", SCOPE,
        "--api-url", github_api.url, "--event-type", "push", "--event-type", "issues",
        input=f"{GITHUB_TOKEN}\n",
    )  # fmt: skip


def endpoint_of(cli: Cli, name: str) -> dict:
    """`endpoints show NAME`, without asking the provider."""
    return json.loads(cli("endpoints", "show", name, "--no-check").stdout)


def hook_id_of(cli: Cli, name: str) -> str:
    return endpoint_of(cli, name)["provider_side"]["webhook"]["hook_id"]


def read_at(shown: dict) -> str:
    """When an endpoint's webhook (``endpoint_of``) was last read at its provider, as the
    CLI prints a time."""
    return shown_time(shown["provider_side"]["webhook"]["seen"]["checked_at"])
