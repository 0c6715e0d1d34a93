"""A destination limited to 50 forwards a second receives at most 50 in any one second,
measured by the broker's own clock (a Redis stream entry's id is the server's time in
milliseconds); forwards held back by the limit are not failures."""

from __future__ import annotations

from collections import deque
from typing import cast

import redis

from tests.support.database import count
from tests.support.forwarding import REDIS_URL, add_destination, forward_all, redis_stream
from tests.support.pipeline import deliver, drain, make_endpoint

RATE = 50
EVENTS = 300


def most_in_one_second(milliseconds: list[int]) -> int:
    """The most entries in any window of 1,000 ms."""
    window: deque[int] = deque()
    most = 0
    for at in sorted(milliseconds):
        window.append(at)
        while window[0] <= at - 1000:
            window.popleft()
        most = max(most, len(window))
    return most


def test_a_destination_limited_to_50_a_second_receives_at_most_50_in_any_second(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    with redis_stream() as (given, _read):
        add_destination(runtime, "redis", given, endpoint=endpoint, rate_limit=RATE)
        for index in range(EVENTS):
            deliver(client, endpoint, f"evt_{index:05d}")
        drain(runtime, timeout=120)
        forward_all(runtime, EVENTS, timeout=60)
        stream = given["stream"]
        entries = cast(list[tuple[bytes, object]], redis.Redis.from_url(REDIS_URL).xrange(stream))
    arrived = [int(entry_id.split(b"-")[0]) for entry_id, _ in entries]
    assert len(arrived) == EVENTS
    assert most_in_one_second(arrived) <= RATE
    # It was the limit that paced them: 300 at 50 a second take at least 5 s.
    assert (max(arrived) - min(arrived)) / 1000 >= EVENTS / RATE - 1
    assert count(runtime, "SELECT failed_total FROM destinations") == 0
    assert count(runtime, "SELECT max(attempts) FROM forwards") == 1


def test_the_window_counts_what_a_burst_would_exceed():
    assert most_in_one_second([0, 10, 999, 1000, 1001]) == 4
    assert most_in_one_second([0, 1000, 2000]) == 1
