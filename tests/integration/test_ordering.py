"""Per-key ordering with real processes: a relay and several workers, small jobs that mix
many events of the same keys, and a handler that records when each run happened."""

from __future__ import annotations

import itertools
import os
import signal
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from sqlalchemy import select, text

from hooklatch.endpoints.models import Endpoint
from hooklatch.events.models import Event
from hooklatch.events.replay import replay_one
from hooklatch.ordering.service import blocked_keys, release_key
from tests.support.database import count
from tests.support.effects import runs
from tests.support.pipeline import configure_ordering, make_endpoint, wait_for
from tests.support.processes import hooklatch_cmd, process_env
from tests.support.signing import stripe_event, stripe_headers

pytestmark = pytest.mark.slow

SECRET = "whsec_test_secret"


def ordered_endpoint(runtime, policy, dead="park"):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    configure_ordering(runtime, endpoint, policy=policy, dead=dead)
    return endpoint


def send(client, endpoint, customer, kind="ok"):
    body = stripe_event(
        f"evt_{uuid.uuid4().hex[:20]}", event_type=f"ordered.{kind}", customer=customer
    )
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200, response.json
    return int(response.json["events"][0]["id"])


def start_pipeline(procs, settings, tmp_path, *, workers=3, **env):
    """A relay and ``workers`` workers; jobs of 5 ids, four of them queued at once, so that
    every worker holds jobs with events of the same keys."""
    markers = tmp_path / "markers"
    markers.mkdir(exist_ok=True)
    defaults = {
        "HOOKLATCH_JOB_SIZE": "5",
        "HOOKLATCH_QUEUED_JOBS": "4",
        "HOOKLATCH_TEST_MARKERS": str(markers),
        "HOOKLATCH_TEST_RUN_SECONDS": "0.02",
    }
    environment = process_env(settings, **{**defaults, **env})
    started = [procs("relay", hooklatch_cmd("relay"), environment)]
    started += [procs(f"worker{n}", hooklatch_cmd("worker"), environment) for n in range(workers)]
    return started, markers


def logs(started):
    return "\n".join(f"--- {p.log_path.name}\n{p.log()[-3000:]}" for p in started)


def statuses(runtime, ids):
    with runtime.engine.connect() as connection:
        rows = connection.execute(select(Event.id, Event.status).where(Event.id.in_(ids))).all()
    return dict(rows)


def wait_status(runtime, ids, status, started, timeout=60):
    wait_for(
        lambda: set(statuses(runtime, ids).values()) == {status},
        timeout=timeout,
        message=f"events {status}",
        explain=lambda: f"{statuses(runtime, ids)}\n{logs(started)}",
    )


def recorded(runtime):
    """Each key's committed runs, in the order they started."""
    with runtime.engine.connect() as connection:
        rows = connection.execute(select(runs).order_by(runs.c.started)).all()
    by_key = defaultdict(list)
    for row in rows:
        by_key[row.key].append(row)
    return by_key


def assert_no_overlap(by_key):
    for key, key_runs in by_key.items():
        for before, after in itertools.pairwise(key_runs):
            assert after.started >= before.finished, (
                f"key {key}: event {after.event_id} started "
                f"{before.finished - after.started:.4f} s before event {before.event_id} finished"
            )


def interleaved(client, endpoint, keys, per_key, kind="ok"):
    sent = defaultdict(list)
    for _ in range(per_key):
        for key in keys:
            sent[key].append(send(client, endpoint, key, kind))
    return sent


def test_fifo_runs_each_keys_events_one_at_a_time_in_arrival_order(
    procs, proc_settings, runtime, client, tmp_path
):
    endpoint = ordered_endpoint(runtime, "fifo")
    started, _ = start_pipeline(procs, proc_settings, tmp_path)
    sent = interleaved(client, endpoint, ["cus_a", "cus_b", "cus_c", "cus_d"], 30)
    everything = [i for ids in sent.values() for i in ids]
    wait_status(runtime, everything, "processed", started)

    by_key = recorded(runtime)
    for key, ids in sent.items():
        assert [r.event_id for r in by_key[key]] == ids, f"key {key} ran out of order"
    assert_no_overlap(by_key)
    # Several workers took part: the order did not come from one process doing it all.
    assert len({r.pid for key_runs in by_key.values() for r in key_runs}) > 1


def test_serial_never_runs_two_events_of_a_key_at_once(
    procs, proc_settings, runtime, client, tmp_path
):
    endpoint = ordered_endpoint(runtime, "serial")
    started, _ = start_pipeline(procs, proc_settings, tmp_path)
    sent = interleaved(client, endpoint, ["cus_a", "cus_b", "cus_c"], 30)
    everything = [i for ids in sent.values() for i in ids]
    wait_status(runtime, everything, "processed", started)

    by_key = recorded(runtime)
    assert sorted(r.event_id for k in by_key.values() for r in k) == sorted(everything)
    assert_no_overlap(by_key)


def test_a_failing_head_holds_only_its_key_which_resumes_in_order_once_it_succeeds(
    procs, proc_settings, runtime, client, tmp_path
):
    endpoint = ordered_endpoint(runtime, "fifo")
    started, _ = start_pipeline(procs, proc_settings, tmp_path)
    head = send(client, endpoint, "cus_a", "flaky")  # fails its first attempt
    behind = [send(client, endpoint, "cus_a") for _ in range(4)]
    other = [send(client, endpoint, "cus_b") for _ in range(4)]
    wait_status(runtime, [head, *behind, *other], "processed", started)

    by_key = recorded(runtime)
    assert [r.event_id for r in by_key["cus_a"]] == [head, *behind]
    assert [r.event_id for r in by_key["cus_b"]] == other
    assert count(runtime, "SELECT attempts FROM events WHERE id = :i", i=head) == 2
    failed_at = count(
        runtime,
        "SELECT extract(epoch FROM finished_at) FROM attempts WHERE event_id = :i AND number = 1",
        i=head,
    )
    # The other key did not wait for the failing one's retry.
    assert by_key["cus_b"][0].started < by_key["cus_a"][0].started
    assert by_key["cus_a"][0].started > float(failed_at)
    assert_no_overlap(by_key)


def dead_head(procs, settings, runtime, client, tmp_path, dead):
    """A fifo endpoint whose dead events do as ``dead`` says, a relay and worker running
    (two attempts), and on key cus_a an event that always fails with three behind it: the
    endpoint, the processes started, the failing event and those behind it."""
    endpoint = ordered_endpoint(runtime, "fifo", dead=dead)
    started, _ = start_pipeline(procs, settings, tmp_path, HOOKLATCH_MAX_ATTEMPTS="2")
    head = send(client, endpoint, "cus_a", "fail")
    behind = [send(client, endpoint, "cus_a") for _ in range(3)]
    return endpoint, started, head, behind


def test_a_dead_head_parks_its_key_until_it_is_released(
    procs, proc_settings, runtime, client, tmp_path
):
    endpoint, started, head, behind = dead_head(
        procs, proc_settings, runtime, client, tmp_path, "park"
    )
    other = [send(client, endpoint, "cus_b") for _ in range(3)]
    wait_status(runtime, other, "processed", started)
    wait_status(runtime, [head], "dead", started)
    # Sweeps come and go: the key stays parked, its events pending and never run.
    time.sleep(3 * proc_settings.sweep_interval_seconds + proc_settings.dispatch_grace_seconds)
    assert set(statuses(runtime, behind).values()) == {"pending"}
    assert "cus_a" not in recorded(runtime)
    with runtime.session_factory() as session:
        blocked = blocked_keys(session)
    assert [(b.key, b.event_id, b.waiting) for b in blocked] == [("cus_a", head, 3)]
    assert "dead" in blocked[0].why

    with runtime.session_factory.begin() as session:
        release_key(
            session,
            session.get(Endpoint, endpoint),
            "cus_a",
            actor="test",
            reason="the dead event was handled by hand",
            now=runtime.clock(),
        )
    wait_status(runtime, behind, "processed", started)
    assert [r.event_id for r in recorded(runtime)["cus_a"]] == behind
    assert statuses(runtime, [head]) == {head: "dead"}


def test_a_dead_head_releases_its_key_when_so_configured(
    procs, proc_settings, runtime, client, tmp_path
):
    _, started, head, behind = dead_head(procs, proc_settings, runtime, client, tmp_path, "release")
    wait_status(runtime, behind, "processed", started)
    assert statuses(runtime, [head]) == {head: "dead"}
    died_at = count(
        runtime,
        "SELECT extract(epoch FROM max(finished_at)) FROM attempts WHERE event_id = :i",
        i=head,
    )
    key_runs = recorded(runtime)["cus_a"]
    assert [r.event_id for r in key_runs] == behind
    assert key_runs[0].started > float(died_at)  # held until the head was dead
    with runtime.session_factory() as session:
        assert blocked_keys(session) == []


def test_a_replay_of_a_mid_sequence_event_never_overlaps_its_keys_other_events(
    procs, proc_settings, runtime, client, tmp_path
):
    endpoint = ordered_endpoint(runtime, "fifo")
    started, _ = start_pipeline(
        procs, proc_settings, tmp_path, workers=2, HOOKLATCH_TEST_RUN_SECONDS="0.15"
    )
    first = [send(client, endpoint, "cus_a") for _ in range(3)]
    wait_status(runtime, first[:2], "processed", started)
    later = [send(client, endpoint, "cus_a") for _ in range(6)]
    with runtime.session_factory.begin() as session:
        replay_one(
            session, first[1], actor="test", reason="mid-sequence replay", now=runtime.clock()
        )
    wait_status(runtime, [*first, *later], "processed", started)
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM replays WHERE status = 'succeeded'") == 1,
        timeout=30,
        message="replay done",
        explain=lambda: logs(started),
    )
    key_runs = recorded(runtime)["cus_a"]
    replayed = [r for r in key_runs if r.is_replay]
    assert [r.event_id for r in replayed] == [first[1]]
    assert [r.event_id for r in key_runs if not r.is_replay] == [*first, *later]
    assert_no_overlap({"cus_a": key_runs})


def test_sigkill_of_the_worker_running_a_keys_head_loses_and_reorders_nothing(
    procs, proc_settings, runtime, client, tmp_path
):
    endpoint = ordered_endpoint(runtime, "fifo")
    started, markers = start_pipeline(procs, proc_settings, tmp_path, workers=2)
    head = send(client, endpoint, "cus_a", "hang")  # its first run never returns
    behind = [send(client, endpoint, "cus_a") for _ in range(5)]
    other = [send(client, endpoint, "cus_b") for _ in range(5)]
    marker = markers / f"{_external_id(runtime, head)}"
    wait_for(marker.exists, timeout=30, message="head running", explain=lambda: logs(started))
    horse = int(marker.read_text())
    worker = _parent(horse)
    os.kill(worker, signal.SIGKILL)
    os.kill(horse, signal.SIGKILL)

    wait_status(runtime, [head, *behind, *other], "processed", started)
    by_key = recorded(runtime)
    assert [r.event_id for r in by_key["cus_a"]] == [head, *behind]
    assert [r.event_id for r in by_key["cus_b"]] == other
    assert_no_overlap(by_key)
    assert count(runtime, "SELECT count(*) FROM test_runs") == 11  # each once


def test_an_event_left_to_its_keys_holder_runs_as_soon_as_the_holder_lets_go(
    procs, proc_settings, runtime, client, tmp_path
):
    """The holder read the key's events before this one was stored; the job that brought
    it found the key held and left it to the holder. The holder looks again once it has
    committed, so the event runs then, in the holder's job, and not after the relay's
    dispatch grace (two minutes here) hands its outbox row out again."""
    endpoint = ordered_endpoint(runtime, "fifo")
    started, markers = start_pipeline(
        procs, proc_settings, tmp_path, workers=2, HOOKLATCH_DISPATCH_GRACE_SECONDS="120"
    )
    warm = send(client, endpoint, "cus_warm")
    wait_status(runtime, [warm], "processed", started)
    head = send(client, endpoint, "cus_a", "slow")
    marker = markers / f"{_external_id(runtime, head)}"
    wait_for(marker.exists, timeout=30, message="head running", explain=lambda: logs(started))
    behind = send(client, endpoint, "cus_a")  # its job goes to the idle worker

    wait_status(runtime, [head, behind], "processed", started, timeout=20)
    key_runs = recorded(runtime)["cus_a"]
    assert [r.event_id for r in key_runs] == [head, behind]
    assert_no_overlap({"cus_a": key_runs})
    assert key_runs[1].pid == int(marker.read_text())  # the holder's job ran it


def test_an_event_left_to_a_replay_holding_its_key_runs_once_the_replay_commits(
    procs, proc_settings, runtime, client, tmp_path
):
    """A replay holds its event's key while it runs; a new event's job that finds the key
    held leaves the event, and the replay's job hands it to the relay once it commits."""
    endpoint = ordered_endpoint(runtime, "fifo")
    started, markers = start_pipeline(
        procs, proc_settings, tmp_path, workers=2, HOOKLATCH_DISPATCH_GRACE_SECONDS="120"
    )
    first = send(client, endpoint, "cus_a", "slow")
    wait_status(runtime, [first], "processed", started)
    marker = markers / f"{_external_id(runtime, first)}"
    marker.unlink()
    with runtime.session_factory.begin() as session:
        replay_one(session, first, actor="test", reason="run it again", now=runtime.clock())
    wait_for(marker.exists, timeout=30, message="replay running", explain=lambda: logs(started))
    behind = send(client, endpoint, "cus_a")

    wait_status(runtime, [behind], "processed", started, timeout=20)
    key_runs = recorded(runtime)["cus_a"]
    assert [(r.event_id, r.is_replay) for r in key_runs] == [
        (first, False),
        (first, True),
        (behind, False),
    ]
    assert_no_overlap({"cus_a": key_runs})


def _external_id(runtime, event_id):
    with runtime.engine.connect() as connection:
        return connection.execute(
            text("SELECT external_id FROM events WHERE id = :i"), {"i": event_id}
        ).scalar_one()


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_a_replay_that_makes_a_parked_dead_event_succeed_lets_its_key_go_on(
    procs, proc_settings, runtime, client, tmp_path
):
    endpoint = ordered_endpoint(runtime, "fifo", dead="park")
    started, _ = start_pipeline(procs, proc_settings, tmp_path, HOOKLATCH_MAX_ATTEMPTS="1")
    head = send(client, endpoint, "cus_a", "flaky")  # dies on its one attempt
    behind = [send(client, endpoint, "cus_a") for _ in range(3)]
    wait_status(runtime, [head], "dead", started)
    time.sleep(2 * proc_settings.sweep_interval_seconds + proc_settings.dispatch_grace_seconds)
    assert set(statuses(runtime, behind).values()) == {"pending"}

    with runtime.session_factory.begin() as session:
        replay_one(session, head, actor="test", reason="fixed the bug", now=runtime.clock())
    wait_status(runtime, [head, *behind], "processed", started)
    key_runs = recorded(runtime)["cus_a"]
    assert [r.event_id for r in key_runs] == [head, *behind]
    assert key_runs[0].is_replay
    assert_no_overlap({"cus_a": key_runs})
