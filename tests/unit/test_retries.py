"""How long a failed event waits before its next attempt, the key handlers pass on, and
how long a process waits before it tries its database or Redis again."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from hooklatch.db import backoff, reconnect_delay
from hooklatch.workers.worker.attempts import idempotency_key


def test_the_wait_never_exceeds_the_maximum_however_many_attempts():
    waits = [backoff(attempt, base=1.0, maximum=30.0) for attempt in range(1, 80)]
    assert max(waits) <= timedelta(seconds=30)
    assert min(waits[10:]) >= timedelta(seconds=15)


def test_waits_are_jittered_so_failed_events_do_not_retry_in_step():
    waits = {backoff(4, base=1.0, maximum=60.0) for _ in range(50)}
    assert len(waits) > 40


def test_the_idempotency_key_names_the_endpoint_and_the_providers_event_id():
    event = SimpleNamespace(
        endpoint_id="ep_1", external_id="evt_9", variant="", received_at=datetime.now(UTC)
    )
    assert idempotency_key(event) == "hooklatch:ep_1:evt_9"
    other = SimpleNamespace(endpoint_id="ep_2", external_id="evt_9", variant="")
    assert idempotency_key(other) != idempotency_key(event)


def test_a_conflicting_deliverys_key_carries_its_body_digest():
    """Another body stored under an unsigned id must not share the first event's key, or
    a system downstream that dedupes on it would drop the real event."""
    digest = "ab12cd34ef56ab78" + "0" * 48
    conflict = SimpleNamespace(endpoint_id="ep_1", external_id="evt_9", variant=digest)
    assert idempotency_key(conflict) == "hooklatch:ep_1:evt_9:ab12cd34ef56ab78"


def test_backoff_grows_exponentially_within_jitter_and_respects_the_cap():
    for attempt in range(1, 8):
        delay = backoff(attempt, base=10, maximum=600).total_seconds()
        ceiling = min(600, 10 * 2 ** (attempt - 1))
        assert ceiling / 2 <= delay <= ceiling


def test_reconnect_waits_grow_to_ten_seconds_and_stay_there_for_ever():
    """An outage of hours is thousands of failures in a row: 2 ** 1024 overflowed."""
    assert [reconnect_delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert reconnect_delay(2000) == reconnect_delay(10**6) == 10.0
