"""A destination changed while its sender runs: the forwards waiting go out with the new
settings, as ``change_destination`` promises, whichever settings changed."""

from __future__ import annotations

from hooklatch.services.forwarding import change_destination
from tests.support.forwarding import (
    REDIS_URL,
    add_destination,
    delivered_forwards,
    forwarder,
    redis_stream,
)
from tests.support.pipeline import deliver, drain, make_endpoint, wait_for


def test_a_stream_changed_without_its_url_takes_the_next_forwards(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    with redis_stream() as (first, read_first), redis_stream() as (second, read_second):
        destination = add_destination(runtime, "redis", first, endpoint=endpoint)
        with forwarder(runtime):
            deliver(client, endpoint, "evt_before")
            drain(runtime, timeout=60)
            wait_for(lambda: delivered_forwards(runtime) >= 1, timeout=30, message="first sent")
            # Only the stream changes: the URL (the one secret) is the same.
            change_destination(
                runtime,
                destination,
                given={"url": REDIS_URL, "stream": second["stream"]},
                actor="test",
            )
            deliver(client, endpoint, "evt_after")
            drain(runtime, timeout=60)
            wait_for(lambda: delivered_forwards(runtime) >= 2, timeout=30, message="second sent")
        assert [key.rsplit(":", 1)[1] for key in read_first().keys] == ["evt_before"]
        assert [key.rsplit(":", 1)[1] for key in read_second().keys] == ["evt_after"]
