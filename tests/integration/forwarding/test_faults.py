"""Forwarding under faults: a destination answering 500 then 200, down for 30 s and
back, the relay SIGKILLed mid-publish, the broker restarted, a destination paused then
resumed, a fifo endpoint's keys through failures. Nothing is lost; repeats stay within
what each kind allows (none where the broker dedupes); a key's forwards stay in order."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import defaultdict
from dataclasses import replace

import pytest

from hooklatch.services.forwarding import pause_destination
from tests.support.database import count
from tests.support.forwarding import (
    add_destination,
    delivered_forwards,
    forward_all,
    forwarder,
    jetstream,
    keys_of,
    pending_forwards,
    rabbit_queue,
    redis_stream,
    signing_secret,
)
from tests.support.local_http import Answer, LocalServer
from tests.support.pipeline import configure_ordering, deliver, drain, make_endpoint, wait_for
from tests.support.processes import free_port, hooklatch_cmd, process_env, start_redis
from tests.support.proxy import TcpProxy


@pytest.fixture
def quick(runtime):
    """Retries within a second, a destination's answer within one, a lease of two; and
    attempts enough that an outage of a minute leaves no forward dead."""
    runtime.settings = replace(
        runtime.settings,
        forward_max_attempts=1000,
        forward_retry_base_seconds=0.05,
        forward_retry_max_seconds=0.5,
        forward_timeout_seconds=1.0,
        forward_lease_seconds=2.0,
    )
    return runtime


def processed(client, runtime, endpoint, n, prefix="evt"):
    for index in range(n):
        deliver(client, endpoint, f"{prefix}_{index:05d}")
    drain(runtime, timeout=120)
    return keys_of(runtime, endpoint)


def test_a_destination_answering_500_then_200_gets_each_event_once_it_answers_200(client, quick):
    # Counts are exact here: time enough for every answer on a loaded machine.
    runtime = quick
    runtime.settings = replace(
        runtime.settings, forward_timeout_seconds=5.0, forward_lease_seconds=10.0
    )
    answered: list[tuple[str, int]] = []
    lock = threading.Lock()

    def handle(incoming):
        with lock:
            status = 500 if len(answered) < 150 else 200
            answered.append((incoming.headers["webhook-id"], status))
        return Answer(status)

    endpoint, _ = make_endpoint(runtime)
    with LocalServer(handle) as server:
        add_destination(runtime, "http", {"url": server.url, "signing_secret": signing_secret()})
        keys = processed(client, runtime, endpoint, 200)
        forward_all(runtime, 200)
    accepted = [key for key, status in answered if status == 200]
    assert sorted(accepted) == sorted(keys)  # each once: a 2xx ends a forward
    assert sum(status == 500 for _, status in answered) == 150
    assert count(runtime, "SELECT sum(attempts) FROM forwards") == 350
    assert count(runtime, "SELECT failed_total FROM destinations") == 150


@pytest.mark.slow
def test_a_destination_down_for_30_s_loses_nothing_and_jetstream_holds_each_once(client, quick):
    runtime = quick
    endpoint, _ = make_endpoint(runtime)
    with jetstream() as (given, read):
        proxy = TcpProxy(("127.0.0.1", 4222))
        port = proxy.port
        given = {**given, "url": f"nats://127.0.0.1:{port}"}
        add_destination(runtime, "nats", given, endpoint=endpoint, rate_limit=20)
        keys = processed(client, runtime, endpoint, 300)
        with forwarder(runtime):
            wait_for(lambda: delivered_forwards(runtime) >= 40, timeout=30)
            proxy.stop()
            time.sleep(30)
            down = delivered_forwards(runtime)
            assert down < 300
            proxy = TcpProxy(("127.0.0.1", 4222), port)
            wait_for(lambda: delivered_forwards(runtime) == 300, timeout=60)
        proxy.stop()
        received = read()
    assert set(received.keys) == keys
    assert received.repeats() == 0
    assert count(runtime, "SELECT failed_total FROM destinations") > 0


@pytest.mark.slow
def test_the_relay_killed_mid_publish_loses_nothing_and_repeats_only_what_was_in_flight(
    client, quick, procs
):
    """Two destinations of one endpoint: Redis, which does not dedupe (repeats are the
    forwards the killed relay had sent unacknowledged), and JetStream, which does."""
    runtime = quick
    settings = runtime.settings
    endpoint, _ = make_endpoint(runtime)
    env = process_env(
        settings,
        HOOKLATCH_FORWARD_LEASE_SECONDS="2",
        HOOKLATCH_FORWARD_TIMEOUT_SECONDS="1",
        HOOKLATCH_FORWARD_RETRY_BASE_SECONDS="0.05",
        HOOKLATCH_FORWARD_RETRY_MAX_SECONDS="0.5",
    )
    with redis_stream() as (to_redis, read_redis), jetstream() as (to_nats, read_nats):
        add_destination(runtime, "redis", to_redis, endpoint=endpoint, rate_limit=150)
        add_destination(runtime, "nats", to_nats, endpoint=endpoint, rate_limit=150)
        keys = processed(client, runtime, endpoint, 1000)
        relay = procs("relay", hooklatch_cmd("relay"), env)
        wait_for(
            lambda: delivered_forwards(runtime) >= 300,
            timeout=60,
            explain=relay.log,
        )
        relay.kill(signal.SIGKILL)
        killed_at = delivered_forwards(runtime)
        assert killed_at < 2000
        second = procs("relay", hooklatch_cmd("relay"), env)
        wait_for(
            lambda: delivered_forwards(runtime) == 2000,
            timeout=90,
            explain=second.log,
        )
        redis_held, nats_held = read_redis(), read_nats()
    assert set(redis_held.keys) == keys
    # At most one second's worth at the rate limit was in flight when it died.
    assert redis_held.repeats() <= 150
    assert set(nats_held.keys) == keys
    assert nats_held.repeats() == 0


@pytest.mark.slow
def test_the_broker_restarted_loses_nothing(client, quick, procs, tmp_path):
    """A nats-server and a redis-server of the test's own, each stopped mid-run and
    started again on its own storage; RabbitMQ's connection cut (what a broker restart
    is to its clients) and restored."""
    runtime = quick
    endpoint, _ = make_endpoint(runtime)
    nats_port, redis_port = free_port(), free_port()
    store = tmp_path / "jetstream"

    def nats_server():
        args = ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(nats_port), "-sd", str(store)]
        server = procs("nats-server", args, {"PATH": "/usr/sbin:/usr/bin:/bin"})
        wait_for(lambda: _answers(nats_port), timeout=10)
        return server

    def redis_server():
        return start_redis(procs, redis_port, tmp_path, "--appendonly", "yes")

    servers = {"nats": nats_server(), "redis": redis_server()}
    nats_url, redis_url = f"nats://127.0.0.1:{nats_port}", f"redis://127.0.0.1:{redis_port}/0"
    with (
        jetstream(url=nats_url) as (to_nats, read_nats),
        redis_stream(url=redis_url) as (to_redis, read_redis),
        rabbit_queue() as (to_rabbit, read_rabbit),
    ):
        proxy = TcpProxy(("127.0.0.1", 5672))
        rabbit_port = proxy.port
        to_rabbit = {**to_rabbit, "url": f"amqp://guest:guest@127.0.0.1:{rabbit_port}/%2F"}
        for kind, given in (("nats", to_nats), ("redis", to_redis), ("rabbitmq", to_rabbit)):
            add_destination(runtime, kind, given, endpoint=endpoint, rate_limit=100)
        keys = processed(client, runtime, endpoint, 500)
        with forwarder(runtime):
            wait_for(lambda: delivered_forwards(runtime) >= 300, timeout=30)
            servers["nats"].stop()
            servers["redis"].stop()
            proxy.stop()
            time.sleep(3)
            assert delivered_forwards(runtime) < 1500
            servers = {"nats": nats_server(), "redis": redis_server()}
            proxy = TcpProxy(("127.0.0.1", 5672), rabbit_port)
            wait_for(lambda: delivered_forwards(runtime) == 1500, timeout=60)
        proxy.stop()
        held = {"nats": read_nats(), "redis": read_redis(), "rabbitmq": read_rabbit()}
    for kind, received in held.items():
        assert set(received.keys) == keys, kind
        assert received.repeats() <= 100, kind  # one second's worth at the rate limit
    assert held["nats"].repeats() == 0


def _answers(port):
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def test_a_paused_destination_sends_nothing_and_resumed_sends_oldest_first(client, quick):
    runtime = quick
    endpoint, _ = make_endpoint(runtime)
    with redis_stream() as (given, read):
        destination = add_destination(runtime, "redis", given, endpoint=endpoint)
        pause_destination(runtime, destination, paused=True, actor="test")
        keys = processed(client, runtime, endpoint, 200)
        with forwarder(runtime):
            time.sleep(2)
            assert read().messages == []
            assert pending_forwards(runtime) == 200
            pause_destination(runtime, destination, paused=False, actor="test")
            wait_for(lambda: delivered_forwards(runtime) == 200, timeout=30)
        received = read()
    assert set(received.keys) == keys
    with runtime.session_factory() as session:
        from sqlalchemy import text

        in_order = [
            f"hooklatch:{endpoint}:{external_id}"
            for (external_id,) in session.execute(
                text(
                    "SELECT e.external_id FROM forwards f JOIN events e ON e.id = f.event_id"
                    " ORDER BY f.id"
                )
            )
        ]
    assert received.keys == in_order


def test_a_fifo_endpoints_keys_reach_the_destination_in_order_through_failures(client, quick):
    """Ten customers' events interleaved; the receiver refuses about a third of the
    requests at random. The events each key's receiver accepted are in the key's order."""
    runtime = quick
    endpoint, _ = make_endpoint(runtime)
    configure_ordering(runtime, endpoint, policy="fifo")
    chance = random.Random(31)
    accepted: dict[str, list[str]] = defaultdict(list)
    lock = threading.Lock()

    def handle(incoming):
        with lock:
            if chance.random() < 0.35:
                return Answer(500)
            key = incoming.headers["hooklatch-ordering-key"]
            accepted[key].append(incoming.headers["hooklatch-event-id"])
        return Answer(200)

    order: dict[str, list[str]] = defaultdict(list)
    with LocalServer(handle) as server:
        add_destination(runtime, "http", {"url": server.url, "signing_secret": signing_secret()})
        from tests.support.signing import stripe_event, stripe_headers

        for index in range(200):
            customer = f"cus_{index % 10}"
            event_id = f"evt_{index:05d}"
            body = stripe_event(event_id, customer=customer)
            response = client.post(
                f"/hooks/{endpoint}",
                data=body,
                headers=stripe_headers(body, "whsec_test_secret"),
            )
            assert response.status_code == 200
            order[customer].append(event_id)
        drain(runtime, timeout=120)
        forward_all(runtime, 200, timeout=120)
    assert accepted == order


def test_a_slow_destination_keeps_its_one_sender_through_a_pass_longer_than_the_lease(
    client, quick
):
    """Each answer takes 0.6 s, eight at a time: a pass of 40 forwards takes 3 s, longer
    than the 2 s lease. The sender renews its lease between two calls, so a second relay's
    forwarder beside it never takes the destination over and sends nothing twice."""
    runtime = quick
    seen: list[str] = []
    lock = threading.Lock()

    def handle(incoming):
        time.sleep(0.6)
        with lock:
            seen.append(incoming.headers["webhook-id"])
        return Answer(204)

    endpoint, _ = make_endpoint(runtime)
    with LocalServer(handle) as server:
        add_destination(runtime, "http", {"url": server.url, "signing_secret": signing_secret()})
        keys = processed(client, runtime, endpoint, 40)
        with forwarder(runtime), forwarder(runtime):
            wait_for(lambda: delivered_forwards(runtime) == 40, timeout=30)
    assert sorted(seen) == sorted(keys)
