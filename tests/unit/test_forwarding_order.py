"""A pass's forwards sent in waves that keep each key's order, and the rate limit as at
most N sends in any one second."""

from __future__ import annotations

from datetime import UTC, datetime

from hooklatch.forwarding.kinds.base import Outcome
from hooklatch.forwarding.message import Message
from hooklatch.forwarding.sending import BATCH, PASS_MIN, pass_size, send_in_order
from hooklatch.workers.relay.forwarder import RateWindow

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def message(forward_id: int, key: str | None) -> Message:
    return Message(
        forward_id=forward_id,
        key=f"hooklatch:ep:evt_{forward_id}",
        event_id=f"evt_{forward_id}",
        type="invoice.paid",
        provider="stripe",
        endpoint_id="ep",
        received_at=NOW,
        ordering_key=key,
        body=b"{}",
        content_type="application/json",
    )


class Recording:
    """A publisher that notes each call's messages and fails the ids it is told to."""

    at_once = 1000

    def __init__(self, failing: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.calls: list[list[int]] = []
        self.failing = failing

    def publish(self, messages):
        self.calls.append([m.forward_id for m in messages])
        return [Outcome(m.forward_id not in self.failing, "down") for m in messages]

    def close(self) -> None:
        pass


def test_unkeyed_forwards_go_in_one_wave_and_a_keys_one_after_the_other():
    publisher = Recording()
    messages = [
        message(1, "a"),
        message(2, None),
        message(3, "a"),
        message(4, "b"),
        message(5, "a"),
    ]
    sent = send_in_order(publisher, messages)
    assert publisher.calls == [[1, 2, 4], [3], [5]]
    assert [m.forward_id for m, _ in sent] == [1, 2, 4, 3, 5]
    assert all(outcome.delivered for _, outcome in sent)


def test_a_key_whose_forward_failed_sends_no_more_of_its_own_in_the_pass():
    publisher = Recording(failing={3})
    messages = [message(1, "a"), message(2, "b"), message(3, "a"), message(4, "a"), message(5, "b")]
    sent = send_in_order(publisher, messages)
    assert publisher.calls == [[1, 2], [3, 5]]
    assert {m.forward_id: o.delivered for m, o in sent} == {1: True, 2: True, 3: False, 5: True}


def test_a_key_that_failed_in_an_earlier_call_of_the_pass_stays_held():
    publisher = Recording(failing={1})
    failed: set[str] = set()
    send_in_order(publisher, [message(1, "a"), message(2, "b")], failed)
    sent = send_in_order(publisher, [message(3, "a"), message(4, "b")], failed)
    assert [m.forward_id for m, _ in sent] == [4]
    assert failed == {"a"}


def test_an_unkeyed_failure_holds_nothing_back():
    publisher = Recording(failing={1})
    sent = send_in_order(publisher, [message(1, None), message(2, None)])
    assert publisher.calls == [[1, 2]]
    assert [o.delivered for _, o in sent] == [False, True]


def test_no_limit_takes_a_whole_batch():
    window = RateWindow(None)
    assert window.allowance(0.0) == BATCH


def test_a_limit_allows_that_many_in_any_one_second():
    window = RateWindow(50)
    assert window.allowance(0.0) == 50
    window.took(30, 0.0)
    window.took(20, 0.5)
    assert window.allowance(0.9) == 0
    assert 0.09 < window.wait(0.9) <= 0.1
    assert window.allowance(1.0) == 30  # the first 30 left the window
    assert window.allowance(1.5) == 50


def test_a_limit_below_one_a_second_spreads_sends_over_a_longer_window():
    window = RateWindow(0.5)
    assert window.allowance(0.0) == 1
    window.took(1, 0.0)
    assert window.allowance(1.5) == 0
    assert window.allowance(2.0) == 1


def test_a_pass_takes_what_a_pipelining_publisher_sends_together_and_at_least_its_minimum():
    assert pass_size(1000) == BATCH
    assert pass_size(5000) == BATCH
    assert pass_size(8) == PASS_MIN
    assert pass_size(1) == PASS_MIN
