"""Driving the pipeline inside the test process: endpoints, deliveries, relay and worker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from redis import Redis
from rq import Queue, SimpleWorker
from rq.registry import StartedJobRegistry
from sqlalchemy import delete, update

from hooklatch.endpoints.service import create_endpoint
from hooklatch.events.models import DEAD, Event, OutboxEntry
from hooklatch.jobs import SERIALIZER, queue_names
from hooklatch.runtime import Runtime
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.relay.sinks import RQSink
from hooklatch.workers.worker import jobs
from tests.support.database import count
from tests.support.signing import stripe_event, stripe_headers


def make_endpoint(
    runtime: Runtime,
    provider: str = "stripe",
    *,
    name: str | None = None,
    secrets: Sequence[str] = ("whsec_test_secret",),
    options: dict[str, str] | None = None,
) -> tuple[str, list[str]]:
    """An endpoint created as the CLI creates one; returns its id and plain secrets."""
    with runtime.session_factory.begin() as session:
        endpoint, plain = create_endpoint(
            session,
            provider=runtime.provider(provider),
            name=name or f"{provider}-{uuid.uuid4().hex[:6]}",
            secrets=list(secrets),
            box=runtime.box,
            options=options,
        )
        return endpoint.id, plain


def deliver(
    client: Any,
    endpoint: str,
    event_id: str,
    event_type: str = "invoice.paid",
    secret: str = "whsec_test_secret",
) -> int:
    """POST one Stripe-signed event through the real view; returns its stored id."""
    body = stripe_event(event_id, event_type=event_type)
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, secret))
    assert response.status_code == 200, response.json
    return int(response.json["events"][0]["id"])


def configure_ordering(runtime: Runtime, endpoint: str, **ordering: Any) -> None:
    """The endpoint's ordering set in the database (``policy``, ``dead``, ``hold_seconds``,
    ...), by the actor "test", as every face's change ends in (``set_ordering``)."""
    from hooklatch.endpoints.models import Endpoint
    from hooklatch.ordering.service import set_ordering

    with runtime.session_factory.begin() as session:
        set_ordering(
            session, session.get(Endpoint, endpoint), actor="test", now=runtime.clock(), **ordering
        )


def dead_then_fixed(
    client: Any, runtime: Runtime, router: Any, external_id: str, *, max_attempts: int = 1
) -> tuple[str, int]:
    """An event whose handler (it writes an effect) failed every one of ``max_attempts``
    attempts, so that it is dead, the handler since fixed: its endpoint and stored id."""
    from dataclasses import replace

    from tests.support.database import load_event
    from tests.support.handlers import write_effect

    runtime.settings = replace(runtime.settings, max_attempts=max_attempts)
    healthy = {"value": False}

    @router.on("stripe", "invoice.paid")
    def flaky(event: Any, ctx: Any) -> None:
        write_effect(event, ctx)
        if not healthy["value"]:
            raise RuntimeError("not yet")

    endpoint, _ = make_endpoint(runtime)
    event_id = deliver(client, endpoint, external_id)
    drain(runtime)
    assert load_event(runtime, event_id).status == "dead"
    healthy["value"] = True
    return endpoint, event_id


def runs_of(router: Any, provider: str = "stripe") -> list[int]:
    """A handler of every ``provider`` event that records the id of each event it runs: the
    list it fills, in the order they ran."""
    ran: list[int] = []
    router.on(provider, "*")(lambda event, ctx: ran.append(event.id))
    return ran


def make_dead(
    client: Any, runtime: Runtime, endpoint: str, *names: str, event_type: str
) -> list[int]:
    """Events delivered, then left dead (as a handler that kept failing leaves them), with
    no outbox row; returns their ids."""
    ids = [deliver(client, endpoint, name, event_type) for name in names]
    with runtime.session_factory.begin() as session:
        session.execute(update(Event).where(Event.id.in_(ids)).values(status=DEAD, attempts=8))
        session.execute(delete(OutboxEntry).where(OutboxEntry.event_id.in_(ids)))
    return ids


def post_json(client: Any, endpoint: str, body: bytes, headers: dict[str, str]) -> Any:
    """POST a JSON body to an endpoint through the test client (``headers`` may override
    the content type)."""
    return client.post(
        f"/hooks/{endpoint}", data=body, headers={"Content-Type": "application/json", **headers}
    )


def wait_for(
    predicate: Callable[[], Any],
    *,
    timeout: float,
    interval: float = 0.1,
    message: str = "condition",
    explain: Callable[[], str] | None = None,
) -> float:
    """Poll until ``predicate()`` is true; returns the monotonic time it became so. On a
    timeout, ``explain()`` (a process's log, say) is added to the failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(interval)
    detail = f"\n{explain()}" if explain is not None else ""
    raise AssertionError(f"{message} not reached within {timeout} s{detail}")


def wait_drained(runtime: Runtime, queue: Queue, *, timeout: float = 20) -> None:
    """Every outbox row relayed and every queued or running job finished."""
    wait_for(
        lambda: (
            count(runtime, "SELECT count(*) FROM outbox") == 0
            and queue.count == 0
            and StartedJobRegistry(queue=queue).count == 0
        ),
        timeout=timeout,
        message="outbox and queue drained",
    )


def drain(
    runtime: Runtime, *, timeout: float = 20.0, until: Callable[[], bool] | None = None
) -> None:
    """Relay and work in this process until nothing is pending and due (or `until()`)."""
    jobs.install(runtime)
    assert runtime.settings.redis_url is not None
    redis = Redis.from_url(runtime.settings.redis_url)
    relay = Relay(runtime, RQSink(runtime, redis))
    queues = queue_names(runtime.settings)
    worker = SimpleWorker(queues, connection=redis, serializer=SERIALIZER)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        relay.relay_once()
        relay.sweep_once()
        worker.work(burst=True, logging_level="WARNING")
        if until is not None and until():
            return
        pending = count(runtime, "SELECT count(*) FROM events WHERE status = 'pending'")
        replays = count(runtime, "SELECT count(*) FROM replays WHERE status = 'pending'")
        if until is None and pending == 0 and replays == 0:
            return
        time.sleep(0.05)
    raise AssertionError("work did not drain in time")
