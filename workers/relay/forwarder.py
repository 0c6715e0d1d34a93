"""Forwarding in the relays: a thread that takes the lease of each destination no live
relay sends to, and one sender thread per destination it holds, which sends its forwards
oldest first, at most its rate limit a second, while it is not paused
(hooklatch.forwarding.sending). A sender that loses its lease, or whose destination is
removed, stops; another relay's takes over once the lease runs out."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from datetime import datetime

from hooklatch.db import lease_owner_name, reconnect_delay
from hooklatch.forwarding import kinds, sending
from hooklatch.forwarding.kinds.base import Outcome, Publisher
from hooklatch.forwarding.message import Message
from hooklatch.forwarding.sending import Policy
from hooklatch.logs import Outage, bind
from hooklatch.metrics import FORWARD_SECONDS, FORWARDS
from hooklatch.runtime import Runtime
from hooklatch.workers.relay import background

log = logging.getLogger(__name__)

# The longest a sender waits after a pass in which its destination took nothing (no
# longer than a forward's longest pause either): a destination that is down is not
# asked again for every forward that is due.
DOWN_PAUSE_MAX_SECONDS = 30.0


class RateWindow:
    """At most ``rate`` sends a second, in any second: the times of the sends of the last
    window (one second, or longer for a rate below one a second), each taken when the
    destination acknowledged it."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.sent: deque[float] = deque()

    @property
    def window(self) -> float:
        return 1.0 if not self.rate else max(1.0, 1.0 / self.rate)

    @property
    def limit(self) -> int:
        return sending.BATCH if not self.rate else max(1, int(self.rate * self.window))

    def allowance(self, now: float) -> int:
        if not self.rate:
            return sending.BATCH
        while self.sent and self.sent[0] <= now - self.window:
            self.sent.popleft()
        return min(sending.BATCH, self.limit - len(self.sent))

    def took(self, count: int, now: float) -> None:
        if self.rate:
            self.sent.extend([now] * count)

    def wait(self, now: float) -> float:
        """Until the oldest send leaves the window."""
        return max(0.001, self.sent[0] + self.window - now) if self.sent else 0.0


class Sender:
    """Sends one destination's forwards while this relay holds its lease."""

    def __init__(self, runtime: Runtime, destination_id: str, owner: str) -> None:
        self.runtime = runtime
        self.destination_id = destination_id
        self.owner = owner
        settings = runtime.settings
        self.policy = Policy(
            max_attempts=settings.forward_max_attempts,
            retry_base_seconds=settings.forward_retry_base_seconds,
            retry_max_seconds=settings.forward_retry_max_seconds,
            lease_seconds=settings.forward_lease_seconds,
        )
        self.poll = settings.forward_poll_seconds
        self.publisher: Publisher | None = None
        self.opened_for: object = None  # the Target.version the publisher was opened with
        self.stop = threading.Event()  # the relay's, once it runs
        self.target: sending.Target | None = None  # as the pass before read it
        self.window = RateWindow(None)
        self.renew_at = 0.0  # time.monotonic() when the lease is renewed next
        self.quiet_passes = 0  # passes in a row in which the destination took nothing

    def run(self, stop: threading.Event) -> None:
        self.stop = stop
        failures = 0
        outage = Outage(log, f"forwarding to {self.destination_id}")
        with bind(destination_id=self.destination_id):
            try:
                while not stop.is_set():
                    try:
                        pause = self.step()
                    except Exception as exc:  # the database is away: try again later
                        failures += 1
                        delay = reconnect_delay(failures)
                        outage.failed(exc, delay)
                        stop.wait(delay)
                        continue
                    failures = 0
                    outage.ok()
                    if pause is None:
                        return
                    if pause:
                        stop.wait(pause)
            finally:
                self.close()
                self.give_up()

    def step(self) -> float | None:
        """One pass: returns how long to pause before the next, or None to stop (the lease
        is another relay's, or the destination is gone)."""
        runtime = self.runtime
        if time.monotonic() >= self.renew_at and not self.renew():
            return None
        # The destination and its forwards due, in one read.
        with runtime.session_factory() as session:
            target = sending.target(session, self.destination_id, runtime.box, self.target)
            self.target = target
            if target is None:
                log.info("destination %s removed: its sender stops", self.destination_id)
                return None
            if target.paused:
                return self.poll
            if self.window.rate != target.rate_limit:
                self.window = RateWindow(target.rate_limit)
            allowance = self.window.allowance(time.monotonic())
            if allowance <= 0:
                return self.window.wait(time.monotonic())
            size = sending.pass_size(self.open(target).at_once)
            found, bodiless = sending.due(session, target.id, runtime.clock(), min(allowance, size))
        if not found and not bodiless:
            return self.poll
        sent, held = self.send(target, [due.message for due in found])
        # Counted when the destination has acknowledged them, not when they left: the next
        # pass's then reach it a window after this one's did, whatever the delays between.
        self.window.took(len(sent), time.monotonic())
        by_id = {due.message.forward_id: due for due in found}
        results = [(by_id[message.forward_id], outcome) for message, outcome in sent]
        acknowledged = runtime.clock()
        # What was sent is recorded even when the lease was lost meanwhile: it happened.
        with runtime.session_factory.begin() as session:
            tally = sending.record_outcomes(
                session, target.id, results, bodiless, runtime.clock(), self.policy
            )
        self.count(target.name, results, tally, acknowledged)
        if not held:
            return None
        if found and not tally.delivered:
            self.quiet_passes += 1
            return min(
                DOWN_PAUSE_MAX_SECONDS,
                self.policy.retry_max_seconds,
                reconnect_delay(self.quiet_passes),
            )
        self.quiet_passes = 0
        return 0.0

    def send(
        self, target: sending.Target, messages: list[Message]
    ) -> tuple[list[tuple[Message, Outcome]], bool]:
        """The pass's messages, as many at a time as the publisher sends together; between
        two calls the lease is renewed when it is due, and the pass ends if the relay is
        stopping (what was sent is recorded, the rest waits). Also returns whether the
        lease is still held (if not, the rest is another relay's to send)."""
        publisher = self.open(target)
        sent: list[tuple[Message, Outcome]] = []
        failed: set[str] = set()
        held = True

        def keep_going() -> bool:
            nonlocal held
            if self.stop.is_set():
                return False
            if time.monotonic() >= self.renew_at and not self.renew():
                held = False
            return held

        for start in range(0, len(messages), publisher.at_once):
            if start and not keep_going():
                break
            chunk = messages[start : start + publisher.at_once]
            sent += sending.send_in_order(publisher, chunk, failed, keep_going)
        return sent, held

    def open(self, target: sending.Target) -> Publisher:
        """The destination's publisher, opened again when its settings changed."""
        if self.publisher is None or self.opened_for != target.version:
            self.close()
            kind = kinds.kind(target.kind)
            timeout = self.runtime.settings.forward_timeout_seconds
            self.publisher = kind.open(target.connection, timeout=timeout)
            self.opened_for = target.version
        return self.publisher

    def renew(self) -> bool:
        runtime = self.runtime
        seconds = self.policy.lease_seconds
        with runtime.session_factory.begin() as session:
            held = sending.take_lease(
                session, self.destination_id, self.owner, runtime.clock(), seconds
            )
        if held:
            self.renew_at = time.monotonic() + seconds / 3
        else:
            log.info(
                "destination %s is another relay's now: its sender here stops", self.destination_id
            )
        return held

    def give_up(self) -> None:
        try:
            with self.runtime.session_factory.begin() as session:
                sending.give_up_lease(session, self.destination_id, self.owner)
        except Exception:  # the database is away: the lease runs out by itself
            log.debug("lease of %s not given back", self.destination_id, exc_info=True)

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close()
            self.publisher = None

    @staticmethod
    def count(
        name: str,
        results: list[tuple[sending.Due, Outcome]],
        tally: sending.Tally,
        acknowledged: datetime,
    ) -> None:
        if tally.delivered:
            FORWARDS.labels(name, "delivered").inc(tally.delivered)
        if tally.failed - tally.dead > 0:
            FORWARDS.labels(name, "failed").inc(tally.failed - tally.dead)
        if tally.dead:
            FORWARDS.labels(name, "dead").inc(tally.dead)
        duplicates = sum(1 for _, outcome in results if outcome.duplicate)
        if duplicates:
            FORWARDS.labels(name, "duplicate").inc(duplicates)
        latency = FORWARD_SECONDS.labels(name)
        for due, outcome in results:
            if outcome.delivered:
                latency.observe(max(0.0, (acknowledged - due.created_at).total_seconds()))


class Forwarder:
    """Every relay runs one: it starts a sender for each destination it takes."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.owner = lease_owner_name()
        self.senders: dict[str, threading.Thread] = {}

    def once(self, stop: threading.Event) -> int:
        """Take each destination no relay sends to; returns how many senders run here."""
        runtime = self.runtime
        self.senders = {id_: t for id_, t in self.senders.items() if t.is_alive()}
        with runtime.session_factory() as session:
            free = sending.unclaimed(session, self.owner, runtime.clock())
        for destination_id in free:
            if destination_id in self.senders:
                continue
            sender = Sender(runtime, destination_id, self.owner)
            if not sender.renew():
                continue  # another relay took it first
            self.senders[destination_id] = background.start(
                f"hooklatch-forward-{destination_id}", sender.run, stop
            )
        return len(self.senders)

    def run(self, stop: threading.Event) -> None:
        background.repeat(
            stop,
            lambda: self.once(stop),
            every=max(self.runtime.settings.forward_poll_seconds, 1.0),
            what="forwarding",
            logger=log,
        )

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in list(self.senders.values()):
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def start(self, stop: threading.Event) -> threading.Thread:
        return background.start("hooklatch-forwarder", self.run, stop)
