"""Handlers used by the tests that run real worker processes (HOOKLATCH_HANDLERS)."""

import contextlib
import os
import time
from pathlib import Path

from hooklatch import on
from tests.support.effects import effects, runs, seen


def _write(event, ctx):
    ctx.session.execute(
        effects.insert().values(
            external_id=event.external_id,
            idempotency_key=ctx.idempotency_key,
            attempt=ctx.attempt,
            is_replay=ctx.is_replay,
        )
    )
    ctx.session.flush()


@on("*", "effect.*")
def write_effect(event, ctx):
    _write(event, ctx)


@on("*", "seen.*")
def record_what_was_seen(event, ctx):
    """Write down the event as the handler got it: body, idempotency key and flags."""
    ctx.session.execute(
        seen.insert().values(
            event_id=event.id,
            external_id=event.external_id,
            idempotency_key=ctx.idempotency_key,
            body=event.body.decode(),
            repeats_event_id=event.repeats_event_id,
            conflicts_with_event_id=event.conflicts_with_event_id,
        )
    )


@on("*", "hang.*")
def write_then_hang_once(event, ctx):
    """Write the effect, then hang on the first run so the test can kill the process."""
    _write(event, ctx)
    marker = Path(os.environ["HOOKLATCH_TEST_MARKERS"]) / event.external_id
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        while True:
            time.sleep(1)


@on("*", "stuck.*")
def write_then_stick_once(event, ctx):
    """As a handler blocked where no exception reaches it (in C, or one that swallows
    them all): the first run never returns, whatever RQ's job timeout raises in it."""
    _write(event, ctx)
    marker = Path(os.environ["HOOKLATCH_TEST_MARKERS"]) / event.external_id
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        while True:
            with contextlib.suppress(BaseException):  # what a stuck handler does
                time.sleep(1)


@on("*", "forks.*")
def write_and_leave_a_child(event, ctx):
    """A handler that forks (as multiprocessing does) a child that outlives its process,
    with every descriptor the work horse had."""
    _write(event, ctx)
    if os.fork() == 0:
        time.sleep(20)
        os._exit(0)


@on("*", "fail.*")
def always_fail(event, ctx):
    _write(event, ctx)
    raise RuntimeError("handler failed on purpose")


@on("*", "die.*")
def kill_the_process(event, ctx):
    """As a handler that runs out of memory or segfaults: no exception, the process ends."""
    _write(event, ctx)
    os._exit(1)


@on("*", "slow.*")
def write_slowly(event, ctx):
    """A handler that takes a while: a job of these spans many chunks."""
    _write(event, ctx)
    time.sleep(0.2)


@on("*", "flaky.*")
def fail_while_broken(event, ctx):
    """Fails while the test's `broken` marker exists (a downstream outage), then works:
    the events it killed are fixed by a replay."""
    _write(event, ctx)
    if (Path(os.environ["HOOKLATCH_TEST_MARKERS"]) / "broken").exists():
        raise RuntimeError("the downstream API is down (the test's marker says so)")


@on("*", "ordered.*")
def record_run(event, ctx):
    """Takes a while and records when it ran, for the ordering tests: runs of one key must
    never overlap, and under fifo start in the key's order. ``ordered.fail`` always fails,
    ``ordered.flaky`` fails on its first attempt, ``ordered.hang`` hangs on its first run
    (so a test can kill the process), ``ordered.slow`` says it has started (its marker
    holds the process id) and takes 1.5 s."""
    started = time.time()
    kind = event.type.split(".", 1)[1]
    marker = Path(os.environ.get("HOOKLATCH_TEST_MARKERS", "/nonexistent")) / event.external_id
    if kind == "fail":
        raise RuntimeError("this event always fails")
    if kind == "flaky" and not marker.exists():
        marker.write_text("failed once")
        raise RuntimeError("first attempt fails")
    if kind == "slow":
        marker.write_text(str(os.getpid()))
        time.sleep(1.5)
    if kind == "hang" and not marker.exists():
        marker.write_text(str(os.getpid()))
        while True:
            time.sleep(1)
    time.sleep(float(os.environ.get("HOOKLATCH_TEST_RUN_SECONDS", "0.01")))
    ctx.session.execute(
        runs.insert().values(
            event_id=event.id,
            key=event.payload["data"]["object"].get("customer", ""),
            started=started,
            finished=time.time(),
            pid=os.getpid(),
            is_replay=ctx.is_replay,
        )
    )


@on("*", "paced.*")
def record_a_paced_run(event, ctx):
    """Takes HOOKLATCH_TEST_RUN_SECONDS, as a handler calling a downstream API would, and
    records when it started (the bulk replay tests: a live event's wait is its handler's
    start less its delivery). A second run of one event shows as a second row."""
    started = time.time()
    time.sleep(float(os.environ.get("HOOKLATCH_TEST_RUN_SECONDS", "0.03")))
    ctx.session.execute(
        runs.insert().values(
            event_id=event.id,
            key=event.type,
            started=started,
            finished=time.time(),
            pid=os.getpid(),
            is_replay=ctx.is_replay,
        )
    )
