"""A reconcile run: recover the events an endpoint's provider never delivered.

One run per endpoint at a time, across every relay and face: a lease on its
``reconcile_states`` row, renewed as the run goes, which a killed process loses when it
runs out. The run asks the provider for what it has since the endpoint's cursor (less an
overlap, never past the provider's horizon), within a budget of requests and pages,
waiting out rate limits within a bound. Then:

- *pull*: the events not stored yet are fetched, and stored oldest first by the
  provider's creation time, in the events table under the same unique key as a delivery
  (an event that arrives by webhook meanwhile is simply present);
- *push*: the provider's attempts are grouped by delivery id, and each delivery with no
  successful attempt and not stored here is redelivered once. A redelivery the provider
  refuses for that one delivery (GitHub's 422) is counted, named in the run's error, and
  passed over: it cannot be recovered by redelivery, and the run goes on with the next.

The cursor moves only past what is stored (pull) or was asked for again, or refused for
good (push), in the transaction that stores it, and only when the listing reached the
cursor: a run cut short by an error, a budget, a rate limit or a kill leaves it where the
next run resumes.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar, cast

from sqlalchemy import Table, insert, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from hooklatch.crypto import SecretBox
from hooklatch.db import insert_ignoring_conflict, lease_owner_name, reconnect_delay
from hooklatch.display import utc_time
from hooklatch.endpoints.models import Endpoint
from hooklatch.endpoints.ordering import OrderingSettings
from hooklatch.endpoints.service import decrypt_options, endpoint_url, get_endpoint
from hooklatch.errors import Conflict, MalformedRequest
from hooklatch.events.models import API, API_CALL, PENDING, Event, OutboxEntry
from hooklatch.jsontypes import JSONObject
from hooklatch.logs import one_line
from hooklatch.ordering.placement import place_event, utc
from hooklatch.providers.base import Delivery, IncomingEvent, Provider
from hooklatch.providers.remote import (
    BAD_ANSWER,
    INVALID,
    PULL,
    RATE_LIMITED,
    SERVER_ERROR,
    UNREACHABLE,
    Attempt,
    Page,
    PulledEvent,
    Quota,
    RemoteError,
)
from hooklatch.reconcile.credentials import Reach, reach
from hooklatch.reconcile.models import (
    EndpointCredential,
    ProviderHook,
    ReconcileRun,
    ReconcileState,
)

log = logging.getLogger(__name__)

# ReconcileRun.status
RUNNING = "running"
FINISHED = "finished"
CUT_SHORT = "cut_short"
FAILED = "failed"
INTERRUPTED = "interrupted"

# ReconcileRun.trigger
SCHEDULE = "schedule"
TRIGGERS = (SCHEDULE, "cli", "api", "console")

# Nothing is asked for closer to the provider's horizon than this: the provider's clock
# and ours differ, and a page read a minute later must not reach past it.
HORIZON_MARGIN = timedelta(minutes=10)
# A pull asks the provider for the webhook's types only when it was read back this
# recently; an event made this long before a look may still be of a type added since.
FRESH_LOOK = timedelta(seconds=60)
CLOCK_MARGIN = timedelta(minutes=2)
# Ids kept with a run: what it fetched or redelivered, or would have (a dry run).
SAMPLE_SIZE = 100
# Retries of a call the provider failed (5xx, no answer) before the run stops.
CALL_RETRIES = 2
# Stop.reason: the quota is down to the reserve; another process holds the endpoint.
QUOTA = "quota"
LEASE_LOST = "lease_lost"
# A listing cut short for these asks for nothing more: the quota left is another's, and
# so is the endpoint.
ASK_NO_MORE = (QUOTA, LEASE_LOST)
# RemoteError.reason of a redelivery refused for that one delivery (GitHub's 422): it
# cannot be recovered by redelivery, and the run goes on. Every other error concerns the
# whole API (the credential, the quota, the provider down) and stops the run; a 404 too,
# which GitHub also answers for a token without access and a hook deleted (the listing
# keeps inside GitHub's window, so a delivery past it is not asked for).
REFUSED = (INVALID,)
# Refused deliveries named in a run's error; the rest are counted.
REFUSED_SHOWN = 5

T = TypeVar("T")


@dataclass(frozen=True)
class ReconcileSettings:
    overlap: timedelta = timedelta(minutes=10)
    max_requests: int = 200
    max_pages: int = 150
    # Seconds a run may spend waiting out rate limits before it stops (cut short).
    max_wait: float = 60.0
    lease: timedelta = timedelta(minutes=2)
    # A run stops once the provider says this little quota is left (GitHub's 5,000 an
    # hour are shared with everything else the credential does).
    quota_reserve: int = 100
    # Pulled events stored per transaction, each moving the cursor.
    chunk_size: int = 200
    # Between two scheduled runs of an endpoint; None: only by hand.
    interval: timedelta | None = timedelta(hours=1)
    # How long an event's dedupe key is kept (HOOKLATCH_DEDUPE_RETENTION_DAYS): nothing
    # older is asked for, since an event whose key is gone would be stored and run again.
    dedupe_retention: timedelta = timedelta(days=30)


@dataclass(frozen=True)
class RunRequest:
    trigger: str
    requested_by: str
    dry_run: bool = False
    # Where to start instead of the cursor (still never past the horizon).
    since: datetime | None = None
    # pull: every event since, not only those whose delivery has not succeeded.
    everything: bool = False
    # Asked for through the admin API or the console and carried out by a relay: the
    # request is taken off the endpoint with the lease (``request_run``).
    queued: bool = False

    def as_json(self) -> JSONObject:
        return {
            "trigger": self.trigger,
            "requested_by": self.requested_by,
            "dry_run": self.dry_run,
            "since": self.since.isoformat() if self.since else None,
            "everything": self.everything,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> RunRequest:
        since = data.get("since")
        return cls(
            trigger=str(data.get("trigger") or "api"),
            requested_by=str(data.get("requested_by") or "?"),
            dry_run=bool(data.get("dry_run")),
            since=datetime.fromisoformat(since) if isinstance(since, str) else None,
            everything=bool(data.get("everything")),
            queued=True,
        )


class Busy(Conflict):
    """A reconcile of this endpoint is under way elsewhere."""

    reason = "reconcile_running"


class Stop(Exception):
    """The run ends here, cut short: ``reason`` says why; the next run resumes."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Refused(Exception):
    """The provider refused a call for the one thing it asked about (a redelivery of one
    delivery), in ``reason`` and its own words: the run goes on without it."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Tally:
    """What a run did so far; written to its row as it goes."""

    requests: int = 0
    pages: int = 0
    listed: int = 0
    missing: int = 0
    present: int = 0
    fetched: int = 0
    redeliveries: int = 0
    api_errors: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    sample: list[str] = field(default_factory=list)
    error: str | None = None
    # The deliveries the provider refused to send again, each with its words.
    refused: list[str] = field(default_factory=list)
    waited: float = 0.0

    def columns(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "pages": self.pages,
            "listed": self.listed,
            "missing": self.missing,
            "present": self.present,
            "fetched": self.fetched,
            "redeliveries": self.redeliveries,
            "api_errors": self.api_errors,
            "sample": self.sample or None,
            "error": self.said(),
        }

    def said(self) -> str | None:
        """The run's error: what stopped it (or a note from its start), then the
        deliveries passed over because the provider refused to send them again."""
        if not self.refused:
            return self.error
        count = len(self.refused)
        named = "; ".join(self.refused[:REFUSED_SHOWN])
        more = f"; and {count - REFUSED_SHOWN} more" if count > REFUSED_SHOWN else ""
        noun, verb = ("delivery", "was") if count == 1 else ("deliveries", "were")
        refused = (
            f"the provider refused to redeliver {count} {noun}, which cannot be recovered "
            f"by redelivery and {verb} passed over: {named}{more}"
        )
        return f"{self.error}; {refused}" if self.error else refused


@dataclass
class Run:
    """One run in progress: the endpoint, its provider's API, where it starts."""

    id: int
    endpoint: Endpoint
    reach: Reach
    request: RunRequest
    since: datetime
    url: str
    # Decrypted, secret ones too: kept out of the repr (a traceback's locals).
    options: Mapping[str, str] = field(repr=False)
    ordering: OrderingSettings
    # False when the run starts later than where the cursor resumes (``--since``): what
    # lies between is not read, so the cursor stays.
    moves_cursor: bool = True
    # Where a listing an earlier run left cut short goes on (its next page), and when
    # that listing began: the cursor moves there once the listing reaches ``since``.
    start_token: str | None = None
    listing_began: datetime | None = None
    # The event types the provider delivered to this endpoint's webhook when last read
    # back. A pull lists the account's events: others' are not this endpoint's to store.
    owed: Owed | None = None
    tally: Tally = field(default_factory=Tally)


class Reconciler:
    def __init__(
        self,
        *,
        session_factory: sessionmaker[Session],
        box: SecretBox,
        provider: Callable[[str], Provider],
        settings: ReconcileSettings,
        public_url: str,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.session_factory = session_factory
        self.box = box
        self.provider = provider
        self.settings = settings
        self.public_url = public_url
        self.clock = clock
        self.sleep = sleep
        self.owner = lease_owner_name()

    # The run.

    def run(self, endpoint_ref: str, request: RunRequest) -> JSONObject:
        """Run once now; returns the run as every face shows it (``run_json``). Raises
        Busy when another run holds the endpoint, NotFound or BadRequest when it cannot
        reach its provider's API."""
        run = self._begin(endpoint_ref, request)
        status, reason = FINISHED, None
        try:
            if run.reach.api.family == PULL:
                self._pull(run)
            else:
                self._push(run)
        except Stop as stop:
            status, reason = CUT_SHORT, stop.reason
            run.tally.error = str(stop)
        except Exception as exc:
            status, reason = FAILED, "error"
            run.tally.error = one_line(exc)
            log.exception("reconcile run %d of %s failed", run.id, run.endpoint.id)
        return self._finish(run, status, reason)

    def _begin(self, endpoint_ref: str, request: RunRequest) -> Run:
        now = self.clock()
        with self.session_factory.begin() as session:
            endpoint = get_endpoint(session, endpoint_ref)
            provider = self.provider(endpoint.provider)
            reached = reach(session, endpoint, provider, box=self.box)
            state = self._take_lease(session, endpoint.id, now)
            if request.queued and state.requested == request.as_json():
                state.requested = None  # a newer request made meanwhile waits its turn
            if request.trigger == SCHEDULE and self.settings.interval is not None:
                state.next_run_at = now + self.settings.interval
            session.execute(
                update(ReconcileRun)
                .where(ReconcileRun.endpoint_id == endpoint.id, ReconcileRun.status == RUNNING)
                .values(status=INTERRUPTED, finished_at=now)
            )
            reach_back = min(reached.api.horizon, self.settings.dedupe_retention)
            floor = now - reach_back + HORIZON_MARGIN
            if state.cursor is not None:
                resume = state.cursor - self.settings.overlap
            else:
                resume = endpoint.created_at - self.settings.overlap
            wanted = request.since if request.since is not None else resume
            since = max(wanted, floor)
            # A listing cut short (a budget, a rate limit, an error) goes on downwards from
            # where it stopped, with the same start, so a backlog larger than one run's
            # budget is read through in as many runs, never its newest pages again.
            going_on = state.resume if resumable(state.resume, request) else None
            if going_on is not None:
                since = max(datetime.fromisoformat(going_on["since"]), floor)
            row = ReconcileRun(
                endpoint_id=endpoint.id,
                trigger=request.trigger,
                requested_by=request.requested_by,
                dry_run=request.dry_run,
                everything=request.everything,
                status=RUNNING,
                started_at=now,
                since=since,
                cursor_before=state.cursor,
            )
            session.add(row)
            session.flush()
            run = Run(
                id=row.id,
                endpoint=endpoint,
                reach=reached,
                request=request,
                since=since,
                url=endpoint_url(self.public_url, endpoint),
                options=decrypt_options(endpoint.options, self.box),
                ordering=OrderingSettings(
                    endpoint.ordering,
                    endpoint.ordering_dead,
                    endpoint.hold_seconds,
                    endpoint.ordering_key_path,
                ),
                moves_cursor=since <= max(resume, floor) or going_on is not None,
                start_token=going_on["token"] if going_on else None,
                listing_began=(datetime.fromisoformat(going_on["began"]) if going_on else None),
                owed=owed_types(session.get(ProviderHook, endpoint.id)),
            )
            session.expunge(endpoint)
        if wanted < floor:
            run.tally.error = (
                f"asked from {wanted.isoformat()}, but the provider's API (or the dedupe keys "
                f"kept, HOOKLATCH_DEDUPE_RETENTION_DAYS) reaches back only to "
                f"{floor.isoformat()}: anything it lost before then cannot be recovered"
            )
            log.warning("reconcile of %s: %s", endpoint.id, run.tally.error)
        if not run.moves_cursor:
            run.tally.error = (
                f"asked from {since.isoformat()}, after where the cursor resumes "
                f"({max(resume, floor).isoformat()}): what lies between is not read, so the "
                "cursor stays"
            )
        return run

    def _take_lease(self, session: Session, endpoint_id: str, now: datetime) -> ReconcileState:
        ensure_state(session, endpoint_id)
        taken = session.execute(
            update(ReconcileState)
            .where(
                ReconcileState.endpoint_id == endpoint_id,
                or_(ReconcileState.lease_until.is_(None), ReconcileState.lease_until < now),
            )
            .values(lease_owner=self.owner, lease_until=now + self.settings.lease)
            .returning(ReconcileState.endpoint_id)
        ).first()
        state = session.get(ReconcileState, endpoint_id, populate_existing=True)
        assert state is not None
        if taken is None:
            until = state.lease_until.isoformat() if state.lease_until else "?"
            raise Busy(
                f"a reconcile of {endpoint_id} is under way ({state.lease_owner}, "
                f"its lease runs to {until})"
            )
        return state

    def _renew(self, run: Run) -> None:
        """Keep the lease and show the run's progress; Stop if the lease was lost."""
        now = self.clock()
        with self.session_factory.begin() as session:
            kept = session.execute(
                update(ReconcileState)
                .where(
                    ReconcileState.endpoint_id == run.endpoint.id,
                    ReconcileState.lease_owner == self.owner,
                )
                .values(lease_until=now + self.settings.lease)
                .returning(ReconcileState.endpoint_id)
            ).first()
            session.execute(
                update(ReconcileRun).where(ReconcileRun.id == run.id).values(run.tally.columns())
            )
        if kept is None:
            raise Stop(LEASE_LOST, "another process took over this endpoint's reconcile")

    def _finish(self, run: Run, status: str, reason: str | None) -> JSONObject:
        now, tally, dry = self.clock(), run.tally, run.request.dry_run
        with self.session_factory.begin() as session:
            state = session.get(ReconcileState, run.endpoint.id)
            row = session.get(ReconcileRun, run.id)
            assert row is not None
            row.status, row.stop_reason, row.finished_at = status, reason, now
            for name, value in tally.columns().items():
                setattr(row, name, value)
            if state is not None:
                row.cursor_after = state.cursor
                state.requests_total += tally.requests
                errors = Counter(state.errors_total or {})
                errors.update(tally.errors)
                state.errors_total = dict(errors) or None
                if not dry:
                    state.runs_total += 1
                    state.missing_total += tally.missing
                    state.present_total += tally.present
                    state.fetched_total += tally.fetched
                    state.redeliveries_total += tally.redeliveries
                    if status == FINISHED:
                        state.last_success_at = now
                if state.lease_owner == self.owner:
                    state.lease_owner = state.lease_until = None
            session.flush()
            shown = run_json(row)
        log.info(
            "reconcile run %d of %s %s%s: %d requests, %d pages, %d listed, %d missing, "
            "%d present, %d fetched, %d redeliveries, %d API errors",
            run.id,
            run.endpoint.id,
            status,
            f" ({reason})" if reason else "",
            tally.requests,
            tally.pages,
            tally.listed,
            tally.missing,
            tally.present,
            tally.fetched,
            tally.redeliveries,
            tally.api_errors,
            extra={"endpoint_id": run.endpoint.id},
        )
        return shown

    # Calls to the provider, within the budget.

    def _call(self, run: Run, call: Callable[[], T], *, page: bool, one: bool = False) -> T:
        """One API call within the run's budget: rate limits waited out within
        ``max_wait``, a failing provider tried again a few times, then Stop. With ``one``
        (a call about one delivery), a refusal of that one alone is Refused."""
        tally, settings = run.tally, self.settings
        failures = 0
        while True:
            if tally.requests >= settings.max_requests:
                raise Stop(
                    "budget_requests",
                    f"the run's budget of {settings.max_requests} requests is spent",
                )
            if page and tally.pages >= settings.max_pages:
                raise Stop(
                    "budget_pages", f"the run's budget of {settings.max_pages} pages is spent"
                )
            tally.requests += 1
            try:
                result = call()
            except RemoteError as exc:
                tally.api_errors += 1
                tally.errors[exc.reason] += 1
                status = f"HTTP {exc.status}, " if exc.status else ""
                said = f"{exc.reason} ({status}{exc})"
                if one and refused_alone(exc):
                    raise Refused(exc.reason, said) from None
                log.warning(
                    "reconcile of %s: the provider's API answered %s",
                    run.endpoint.id,
                    said,
                    extra={"endpoint_id": run.endpoint.id},
                )
                failures += 1
                if exc.reason == RATE_LIMITED:
                    delay = (
                        exc.retry_after
                        if exc.retry_after is not None
                        else reconnect_delay(failures)
                    )
                    if tally.waited + delay > settings.max_wait:
                        raise Stop(
                            RATE_LIMITED,
                            f"rate limited: {said}; waiting {delay:.0f} s more would pass the "
                            f"run's {settings.max_wait:.0f} s",
                        ) from None
                    tally.waited += delay
                    self._wait(run, delay)
                    continue
                if exc.reason in (SERVER_ERROR, UNREACHABLE) and failures <= CALL_RETRIES:
                    self.sleep(reconnect_delay(failures))
                    continue
                raise Stop(exc.reason, said) from None
            if page:
                tally.pages += 1
            return result

    def _wait(self, run: Run, seconds: float) -> None:
        """Sleep, renewing the lease at least every half lease: a rate limit may be
        waited out for longer than the lease (HOOKLATCH_RECONCILE_MAX_WAIT_SECONDS)."""
        step = self.settings.lease.total_seconds() / 2
        while True:
            part = min(seconds, step)
            self.sleep(part)
            self._renew(run)
            seconds -= part
            if seconds <= 0:
                return

    def _quota(self, run: Run, quota: Quota) -> None:
        if quota.remaining is not None and quota.remaining <= self.settings.quota_reserve:
            raise Stop(
                QUOTA,
                f"the provider's quota is down to {quota.remaining} "
                f"(HOOKLATCH_RECONCILE_QUOTA_RESERVE is {self.settings.quota_reserve})",
            )

    def _pages(
        self,
        run: Run,
        fetch: Callable[[str | None], Page[T]],
        *,
        done: Callable[[Sequence[T]], bool],
    ) -> tuple[list[T], Stop | None, str | None]:
        """Every page from the first (or where an earlier run's listing stopped) until
        there is no next one or ``done`` says so; with the Stop that cut the listing
        short, if one did, and the token of the page it would have read next."""
        items: list[T] = []
        token = run.start_token
        while True:
            try:
                page = self._call(run, partial(fetch, token), page=True)
            except Stop as stop:
                return items, stop, token
            items.extend(page.items)
            run.tally.listed = len(items)
            if page.next_token is None or done(page.items):
                return items, None, None
            try:
                self._quota(run, page.quota)
                self._renew(run)
            except Stop as stop:
                return items, stop, page.next_token
            token = page.next_token

    # Pull: fetch the events, store the missing ones oldest first.

    def _pull(self, run: Run) -> None:
        api, started = run.reach.api, self.clock()
        only_failed = not run.request.everything
        # Asked of the provider only when read back just now (a scheduled run's look): a
        # type added since is listed by the next run, within its overlap.
        fresh = run.owed is not None and run.owed.read_at >= started - FRESH_LOOK
        types = sorted(run.owed.types) if run.owed is not None and fresh else None
        pulled, cut, next_token = self._pages(
            run,
            lambda token: api.events_page(
                since=run.since, only_failed=only_failed, token=token, types=types
            ),
            done=lambda _: False,
        )
        # Listed newest first: oldest first is the reverse, by creation time (a stable
        # sort keeps the API's order among events created in the same second).
        unique = {event.external_id: event for event in reversed(pulled)}
        ordered = sorted(unique.values(), key=lambda e: e.created)
        parsed = [(event, self._parsed(run, event)) for event in ordered]
        unreadable = next((n for n, (_, item) in enumerate(parsed) if item is None), None)
        if unreadable is not None:
            # Never skipped: what came before it is stored, the cursor stays, and the run
            # says why (the next run meets it again, until the provider answers right).
            bad = parsed[unreadable][0]
            parsed = parsed[:unreadable]
            cut, next_token = (
                Stop(
                    BAD_ANSWER,
                    f"event {bad.external_id} from the provider's API cannot be read: what "
                    "came before it is stored, and the cursor stays",
                ),
                None,
            )
        items = [
            (event, item)
            for event, item in parsed
            if item is not None and (run.owed is None or run.owed.holds(item.type, event.created))
        ]
        run.tally.listed = len(items)
        stored = self._stored_ids(run.endpoint.id, [item.external_id for _, item in items])
        missing = [(event, item) for event, item in items if item.external_id not in stored]
        run.tally.missing = len(missing)
        run.tally.present = len(items) - len(missing)
        run.tally.sample = [item.external_id for _, item in missing[:SAMPLE_SIZE]]
        if run.request.dry_run:
            if cut is not None:
                raise cut
            return
        size = self.settings.chunk_size
        for start in range(0, len(missing), size):
            chunk = missing[start : start + size]
            moved = cut is None and run.moves_cursor
            self._store(run, chunk, cursor=chunk[-1][0].created if moved else None)
            self._renew(run)
        self._go_on_later(run, cut, next_token, started)
        self._advance(run, started)

    def _parsed(self, run: Run, event: PulledEvent) -> IncomingEvent | None:
        delivery = Delivery("POST", run.url, dict(event.headers), event.body, run.options)
        try:
            found = run.reach.provider.parse(delivery)
        except MalformedRequest as exc:
            run.tally.api_errors += 1
            run.tally.errors["bad_answer"] += 1
            log.warning(
                "reconcile of %s: event %s from the provider's API cannot be read (%s)",
                run.endpoint.id,
                event.external_id,
                exc,
            )
            return None
        return found[0] if found else None

    def _stored_ids(self, endpoint_id: str, external_ids: Sequence[str]) -> set[str]:
        stored: set[str] = set()
        with self.session_factory() as session:
            for start in range(0, len(external_ids), 500):
                part = external_ids[start : start + 500]
                stored.update(
                    session.scalars(
                        select(Event.external_id).where(
                            Event.endpoint_id == endpoint_id, Event.external_id.in_(part)
                        )
                    )
                )
        return stored

    def _store(
        self,
        run: Run,
        chunk: Sequence[tuple[PulledEvent, IncomingEvent]],
        *,
        cursor: datetime | None,
    ) -> None:
        """Store a chunk of pulled events, oldest first, each under a delivery's unique
        key, with its outbox row where it is due; and move the cursor to the newest of
        them, in the same transaction. One stored since by webhook is present."""
        now = self.clock()
        endpoint, provider = run.endpoint, run.reach.provider
        with self.session_factory.begin() as session:
            dialect = session.get_bind().dialect.name
            statement = insert_ignoring_conflict(
                dialect, cast(Table, Event.__table__), ["endpoint_id", "external_id", "variant"]
            ).returning(Event.id, Event.next_attempt_at)
            due: list[int] = []
            for event, item in chunk:
                headers = dict(event.headers)
                placed = place_event(
                    run.ordering, provider, item, headers=headers, body=event.body, now=now
                )
                new = session.execute(
                    statement.values(
                        endpoint_id=endpoint.id,
                        provider=endpoint.provider,
                        external_id=item.external_id,
                        type=item.type,
                        occurred_at=utc(item.occurred_at),
                        received_at=now,
                        status=PENDING,
                        attempts=0,
                        next_attempt_at=placed.due_at,
                        body=event.body,
                        headers=headers,
                        body_sha256=hashlib.sha256(event.body).hexdigest(),
                        mismatched_duplicates=0,
                        ordering_key=placed.key,
                        ordering_position=placed.position,
                        variant="",
                        origin=API,
                        verified_by=API_CALL,
                    )
                ).first()
                if new is None:
                    run.tally.missing -= 1
                    run.tally.present += 1
                    continue
                run.tally.fetched += 1
                if placed.due_at <= now:
                    due.append(new.id)
            if due:  # in the fetched lane: behind live events (hooklatch.jobs)
                session.execute(
                    insert(OutboxEntry),
                    [{"event_id": i, "created_at": now, "fetched": True} for i in due],
                )
            if cursor is not None:
                self._move_cursor(session, run, cursor)

    def _move_cursor(self, session: Session, run: Run, to: datetime) -> None:
        session.execute(
            update(ReconcileState)
            .where(
                ReconcileState.endpoint_id == run.endpoint.id,
                or_(ReconcileState.cursor.is_(None), ReconcileState.cursor < to),
            )
            .values(cursor=to)
        )

    def _go_on_later(
        self, run: Run, cut: Stop | None, next_token: str | None, started: datetime
    ) -> None:
        """A listing cut short: what it found is stored (or asked for again); keep where
        the next run goes on from, then end the run with the Stop."""
        if cut is None:
            return
        if next_token is not None and run.moves_cursor and not run.request.dry_run:
            resume: JSONObject = {
                "token": next_token,
                "since": run.since.isoformat(),
                "began": (run.listing_began or started).isoformat(),
                "everything": run.request.everything,
            }
            with self.session_factory.begin() as session:
                session.execute(
                    update(ReconcileState)
                    .where(ReconcileState.endpoint_id == run.endpoint.id)
                    .values(resume=resume)
                )
        raise cut

    def _advance(self, run: Run, started: datetime) -> None:
        """The listing reached the cursor and everything it found is stored or asked for:
        the cursor moves to when the listing began (the first run's, for a listing that
        went on over several), and nothing is left to go on with."""
        if not run.moves_cursor:
            return
        with self.session_factory.begin() as session:
            self._move_cursor(session, run, run.listing_began or started)
            session.execute(
                update(ReconcileState)
                .where(ReconcileState.endpoint_id == run.endpoint.id)
                .values(resume=None)
            )

    # Push: group the attempts by delivery, redeliver what never succeeded.

    def _push(self, run: Run) -> None:
        api, started, since = run.reach.api, self.clock(), run.since
        attempts, cut, next_token = self._pages(
            run,
            lambda token: api.attempts_page(token=token),
            done=lambda items: bool(items) and min(a.at for a in items) < since,
        )
        deliveries: dict[str, list[Attempt]] = {}
        for attempt in attempts:
            deliveries.setdefault(attempt.delivery_id, []).append(attempt)
        run.tally.listed = len(deliveries)
        failed = {
            delivery_id: tried
            for delivery_id, tried in deliveries.items()
            if not any(a.succeeded for a in tried) and max(a.at for a in tried) >= since
        }
        stored = self._stored_ids(run.endpoint.id, list(failed))
        missing = sorted(
            (tried for delivery_id, tried in failed.items() if delivery_id not in stored),
            key=lambda tried: min(a.at for a in tried),
        )
        run.tally.present = len(failed) - len(missing)
        run.tally.missing = len(missing)
        run.tally.sample = [tried[0].delivery_id for tried in missing[:SAMPLE_SIZE]]
        if run.request.dry_run or (cut is not None and cut.reason in ASK_NO_MORE):
            if cut is not None:
                raise cut
            return
        # A Stop here (the credential refused, the budget spent, a rate limit longer than
        # the run may wait, the lease lost) leaves the cursor, and any listing an earlier
        # run left to go on with, as they were: the next run lists the same attempts again
        # and finds those asked for redelivered (an attempt that succeeded, or the event
        # stored), so it asks for the rest only.
        for tried in missing:
            latest = max(tried, key=lambda a: a.at)
            redeliver = partial(api.redeliver, latest.attempt_id)
            try:
                self._call(run, redeliver, page=False, one=True)
            except Refused as refused:
                self._passed_over(run, latest, refused)
            else:
                run.tally.redeliveries += 1
            # A run may ask for as many redeliveries as its budget allows, slower in all
            # than its lease.
            self._renew(run)
        self._go_on_later(run, cut, next_token, started)
        self._advance(run, started)

    def _passed_over(self, run: Run, attempt: Attempt, refused: Refused) -> None:
        """A delivery the provider will not send again: asking again would meet the same
        answer, and would keep the cursor, and every newer delivery, behind it. It is
        named in the run's error and the log, counted by reason, and passed over."""
        run.tally.refused.append(f"{attempt.delivery_id}: {refused}")
        log.warning(
            "reconcile of %s: the provider refused to redeliver %s (attempt %s): %s; it "
            "cannot be recovered by redelivery, and the run goes on",
            run.endpoint.id,
            attempt.delivery_id,
            attempt.attempt_id,
            refused,
            extra={"endpoint_id": run.endpoint.id},
        )


def refused_alone(error: RemoteError) -> bool:
    """Whether the provider refused what a call asked about alone (REFUSED), not the
    whole API: a redirect (GitHub's 301, the repository renamed) concerns every call."""
    return error.reason in REFUSED and not (error.status is not None and error.status < 400)


@dataclass(frozen=True)
class Owed:
    """The event types a webhook received when it was read back, at ``read_at``."""

    types: frozenset[str]
    read_at: datetime

    def holds(self, event_type: str, created: datetime) -> bool:
        """Whether an event may be the webhook's: one of its types, or made after the look
        (less a margin for clocks), when a type may have been added to it."""
        return event_type in self.types or created > self.read_at - CLOCK_MARGIN


def owed_types(hook: ProviderHook | None) -> Owed | None:
    """What the provider held for the webhook at its last successful look (registration
    or a read-back); None, every type, for "*", or where nothing was read (no webhook, a
    credential alone, a look that failed since, a webhook gone)."""
    if hook is None or hook.check_error is not None or hook.checked_at is None:
        return None
    types = hook.seen_event_types
    if not types or "*" in types:
        return None
    return Owed(frozenset(types), utc_time(hook.checked_at))


def resumable(resume: Mapping[str, object] | None, request: RunRequest) -> bool:
    """Whether a run goes on with a listing an earlier one left cut short: a run like it
    (not a dry run, no start of its own, the same kind of listing)."""
    return (
        resume is not None
        and not request.dry_run
        and request.since is None
        and bool(resume.get("everything")) == request.everything
    )


def run_json(row: ReconcileRun) -> JSONObject:
    """A run as every face shows it."""

    def when(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "id": row.id,
        "endpoint_id": row.endpoint_id,
        "trigger": row.trigger,
        "requested_by": row.requested_by,
        "dry_run": row.dry_run,
        "everything": row.everything,
        "status": row.status,
        "stop_reason": row.stop_reason,
        "error": row.error,
        "started_at": when(row.started_at),
        "finished_at": when(row.finished_at),
        "since": when(row.since),
        "cursor_before": when(row.cursor_before),
        "cursor_after": when(row.cursor_after),
        "requests": row.requests,
        "pages": row.pages,
        "listed": row.listed,
        "missing": row.missing,
        "present": row.present,
        "fetched": row.fetched,
        "redeliveries": row.redeliveries,
        "api_errors": row.api_errors,
        "sample": list(row.sample or []),
    }


def recent_runs(session: Session, endpoint_id: str, *, limit: int = 20) -> list[JSONObject]:
    rows = session.scalars(
        select(ReconcileRun)
        .where(ReconcileRun.endpoint_id == endpoint_id)
        .order_by(ReconcileRun.id.desc())
        .limit(limit)
    )
    return [run_json(row) for row in rows]


def request_run(session: Session, endpoint: Endpoint, request: RunRequest) -> None:
    """Ask the relays for a run of this endpoint (the admin API, the console): the next
    relay step takes it, with the lease. A request made while one waits replaces it."""
    ensure_state(session, endpoint.id)
    session.execute(
        update(ReconcileState)
        .where(ReconcileState.endpoint_id == endpoint.id)
        .values(requested=request.as_json())
    )


def due_endpoints(
    session: Session, *, now: datetime, scheduled: bool
) -> list[tuple[str, RunRequest]]:
    """The endpoints a relay should reconcile now, with what to run: a run asked for,
    else (``scheduled``) one whose next scheduled run is due. Endpoints whose lease is
    held are left to their holder."""
    rows = session.execute(
        select(EndpointCredential.endpoint_id, ReconcileState.requested, ReconcileState.next_run_at)
        .join(Endpoint, Endpoint.id == EndpointCredential.endpoint_id)
        .outerjoin(ReconcileState, ReconcileState.endpoint_id == EndpointCredential.endpoint_id)
        .where(
            Endpoint.enabled,
            or_(ReconcileState.lease_until.is_(None), ReconcileState.lease_until < now),
        )
        .order_by(EndpointCredential.endpoint_id)
    ).all()
    due = []
    for endpoint_id, requested, next_run_at in rows:
        if requested:
            due.append((endpoint_id, RunRequest.from_json(requested)))
        elif scheduled and (next_run_at is None or next_run_at <= now):
            due.append((endpoint_id, RunRequest(trigger=SCHEDULE, requested_by="relay")))
    return due


def ensure_state(session: Session, endpoint_id: str) -> None:
    """The endpoint's reconcile_states row, made if it is missing (by whoever comes first)."""
    dialect = session.get_bind().dialect.name
    session.execute(
        insert_ignoring_conflict(
            dialect, cast(Table, ReconcileState.__table__), ["endpoint_id"]
        ).values(
            endpoint_id=endpoint_id,
            missing_total=0,
            present_total=0,
            fetched_total=0,
            redeliveries_total=0,
            requests_total=0,
            runs_total=0,
        )
    )
