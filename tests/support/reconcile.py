"""A reconciler like the runtime's, with other settings (a budget, a lease), clock or sleep;
FakeStripe beside the app served over HTTP; and an endpoint registered with FakeStripe or
FakeGitHub on the runtime's clock, with what is done to its webhook there."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from hooklatch.providers.remote import Place
from hooklatch.reconcile.models import ProviderHook
from hooklatch.reconcile.runs import Busy, Reconciler, RunRequest
from hooklatch.runtime import Runtime, reconciler
from hooklatch.services.provider_side import NewRegistration, add_registered
from tests.support.fake_github import FakeGitHub
from tests.support.fake_stripe import FakeStripe
from tests.support.live_app import served
from tests.support.tokens import GITHUB_TOKEN

STRIPE_KEY = "rk_test_registered_0123456789abcdef"
SCOPE = "repos/acme/shop"
# Numbers the objects of the events lost at a provider.
_lost = itertools.count()


def reconciler_with(
    runtime: Runtime,
    *,
    clock: Callable[[], datetime] | None = None,
    sleep: Callable[[float], None] | None = None,
    **settings: object,
) -> Reconciler:
    base = reconciler(runtime)
    return Reconciler(
        session_factory=base.session_factory,
        box=base.box,
        provider=base.provider,
        settings=replace(base.settings, **settings),  # type: ignore[arg-type]
        public_url=base.public_url,
        clock=clock or base.clock,
        sleep=sleep or base.sleep,
    )


def second_run(reconciler: Reconciler, endpoint: str) -> str:
    """A run started beside another: "busy" where the other holds the endpoint, else
    "ran"."""
    try:
        reconciler.run(endpoint, RunRequest(trigger="cli", requested_by="second"))
    except Busy:
        return "busy"
    return "ran"


@contextmanager
def stripe_and_app(app, runtime, key):
    """FakeStripe answering ``key``, and the app served over HTTP at the public URL the
    endpoint registers (where FakeStripe delivers)."""
    with served(app) as url, FakeStripe() as fake:
        runtime.settings = replace(runtime.settings, public_url=url)
        fake.add_key(key)
        yield fake


@dataclass
class AtTheProvider:
    """An endpoint registered with FakeStripe or FakeGitHub, and what is done to its
    webhook there without hooklatch: by hand in Stripe's dashboard or GitHub's settings,
    or by the provider itself (Stripe disables an endpoint whose deliveries keep failing)."""

    provider: str
    endpoint: str
    name: str
    # What hooklatch registered it for.
    event_types: tuple[str, ...]
    hook_id: str
    fake: FakeStripe | FakeGitHub

    def lose_event(self) -> str:
        """An event the provider has that never reached hooklatch (Stripe never delivered
        it; GitHub's delivery failed): the id it is stored under once recovered."""
        n = next(_lost)
        if isinstance(self.fake, FakeStripe):
            event = self.fake.create_event("invoice.paid", {"id": f"in_{n}", "object": "invoice"})
            return str(event["id"])
        return self.fake.deliver(self.hook_id, "push", {"ref": f"refs/heads/l{n}"}, fail=True)

    def disable(self) -> None:
        if isinstance(self.fake, FakeStripe):
            self.fake.update_endpoint(self.hook_id, disabled=True)
        else:
            self.fake.change_hook(self.hook_id, active=False)

    def repoint(self, url: str) -> None:
        if isinstance(self.fake, FakeStripe):
            self.fake.update_endpoint(self.hook_id, url=url)
        else:
            self.fake.change_hook(self.hook_id, url=url)

    def delete(self) -> None:
        if isinstance(self.fake, FakeStripe):
            self.fake.delete_endpoint(self.hook_id)
        else:
            self.fake.delete_hook(self.hook_id)

    def requests(self) -> int:
        """How many requests the provider's API was sent."""
        return len(self.fake.requests)

    def read_backs(self) -> int:
        """How many times the webhook itself was read through the API (GET of it)."""
        if isinstance(self.fake, FakeStripe):
            path = f"/v1/webhook_endpoints/{self.hook_id}"
        else:
            path = f"/{SCOPE}/hooks/{self.hook_id}"
        return sum(1 for r in self.fake.requests if r.method == "GET" and r.path == path)


def stripe_registered(
    runtime: Runtime,
    fake: FakeStripe,
    key: str,
    *,
    event_types: tuple[str, ...] = ("invoice.paid",),
) -> tuple[str, str]:
    """A Stripe endpoint registered with FakeStripe through the service every face uses:
    its id here and its webhook's id at Stripe."""
    new = NewRegistration(
        provider="stripe",
        name="billing",
        credential={"api_key": key},
        event_types=list(event_types),
        place=Place(api_url=fake.url),
    )
    endpoint = str(add_registered(runtime, new, actor="test")["id"])
    with runtime.session_factory() as session:
        hook = session.get(ProviderHook, endpoint)
        assert hook is not None and hook.hook_id is not None
        return endpoint, hook.hook_id


@contextmanager
def registered_at(
    runtime: Runtime, provider: str, *, clock: Callable[[], datetime], client: Any
) -> Iterator[AtTheProvider]:
    """An endpoint registered with FakeStripe (for invoice.paid) or FakeGitHub (push and
    issues) through the service every face uses. The fake's clock is ``clock`` (the
    runtime's); FakeGitHub delivers into the app through the test ``client``."""

    def send(url: str, headers: Mapping[str, str], body: bytes) -> int:
        return int(client.post(urlsplit(url).path, data=body, headers=dict(headers)).status_code)

    fake: FakeStripe | FakeGitHub
    if provider == "stripe":
        fake = FakeStripe(clock=lambda: clock().timestamp())
        fake.add_key(STRIPE_KEY)
        new = NewRegistration(
            provider="stripe",
            name="billing",
            credential={"api_key": STRIPE_KEY},
            event_types=["invoice.paid"],
            place=Place(api_url=fake.url),
        )
    else:
        fake = FakeGitHub(clock=clock, send=send)
        fake.add_token(GITHUB_TOKEN)
        new = NewRegistration(
            provider="github",
            name="shop",
            credential={"token": GITHUB_TOKEN},
            event_types=["push", "issues"],
            place=Place(api_url=fake.url, scope=SCOPE),
        )
    with fake:
        endpoint = str(add_registered(runtime, new, actor="test")["id"])
        with runtime.session_factory() as session:
            hook = session.get(ProviderHook, endpoint)
            assert hook is not None and hook.hook_id is not None
            hook_id = hook.hook_id
        yield AtTheProvider(provider, endpoint, new.name, tuple(new.event_types), hook_id, fake)
