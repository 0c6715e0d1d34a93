"""Scale-out chaos: processes killed at random while events arrive; nothing lost or doubled.

Several web servers (gunicorn, as the Procfile runs it), relays and workers share one
PostgreSQL database and one Redis. A sender posts every event several times to random web
servers and retries a send that was not answered 200, as a provider does. Every 1 to 2 s
a random process is SIGKILLed with every process under it (as systemd or Kubernetes stop a
unit: RQ's work horses sit in process groups of their own) and started again.

When the sending ends, so do the kills. Then every event must be processed within the
bound of docs/architecture.md ("Lost dispatches") after the last kill: the dispatch grace,
two sweep intervals, and the time to restart a process and run what is left. Each event's
handler must have run exactly once.

`python -m bench.chaos` (`make chaos`) runs the long scenario several times in a row;
tests/integration/test_chaos.py runs a small one in the suite.
"""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import requests
from cryptography.fernet import Fernet

from bench import load
from bench.procs import BIN, ROOT, BenchError, Proc, Procs, free_port, psql, wait_http

# What the relay logs when its sweep finds work whose job was lost.
REDISPATCHED = re.compile(r"re-dispatching (\d+) outbox rows whose job is gone")


@dataclass(frozen=True)
class ChaosPlan:
    events: int = 1500
    sends: int = 3  # each event is posted this many times
    send_seconds: float = 60.0  # the sends are spread over this long
    web: int = 2
    web_workers: int = 2
    relays: int = 2
    workers: int = 3
    kill_every: tuple[float, float] = (1.0, 2.0)
    # Each handler run takes this long, so that workers are busy when they are killed.
    handler_seconds: float = 0.02
    # The production defaults; the suite runs with shorter ones.
    grace_seconds: float = 10.0
    sweep_seconds: float = 5.0
    # Beyond grace + two sweeps: a killed process's restart and the work left at the last
    # kill, on a two-core machine that also runs the load and every other process.
    allowance_seconds: float = 20.0

    @property
    def bound_seconds(self) -> float:
        return self.grace_seconds + 2 * self.sweep_seconds + self.allowance_seconds


@dataclass
class ChaosResult:
    events: int
    sends: int
    kills: list[tuple[float, str]] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    runs: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    recovery_seconds: float | None = None
    bound_seconds: float = 0.0
    redispatched: int = 0  # outbox rows the relays' sweeps found lost and sent again

    @property
    def problems(self) -> list[str]:
        found = []
        if self.unanswered:
            found.append(f"{len(self.unanswered)} events never answered 200")
        if self.recovery_seconds is None:
            found.append(f"not every event processed within {self.bound_seconds:.0f} s")
        if self.statuses != Counter({"processed": self.events}):
            found.append(f"event states {dict(self.statuses)}, expected all processed")
        never = self.events - len(self.runs)
        twice = sorted(e for e, n in self.runs.items() if n > 1)
        if never:
            found.append(f"{never} events whose handler never ran")
        if twice:
            found.append(f"{len(twice)} events whose handler ran more than once: {twice[:5]}")
        return found

    def summary(self) -> str:
        recovery = "none" if self.recovery_seconds is None else f"{self.recovery_seconds:.2f} s"
        kills = Counter(name.split("-")[0] for _, name in self.kills)
        return (
            f"{self.events} events x {self.sends} sends, {len(self.kills)} kills "
            f"({', '.join(f'{n} {role}' for role, n in sorted(kills.items()))}); "
            f"all processed {recovery} after the last kill (bound {self.bound_seconds:.0f} s); "
            f"{self.redispatched} outbox rows re-dispatched after their job was lost; "
            f"handler runs {sum(self.runs.values())} for {len(self.runs)} events"
        )


def kill_tree(pid: int) -> None:
    """SIGKILL a process and everything under it. The group is stopped first, so nothing
    forks a new child while the tree is read."""
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGSTOP)
    for child in _descendants(pid):
        with suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as handle:
                    children = [int(p) for p in handle.read().split()]
            except OSError:
                continue
            found += children
            pending += children
    return found


class Chaos:
    def __init__(
        self,
        plan: ChaosPlan,
        database_url: str,
        redis_url: str,
        work_dir: Path,
        log: Callable[[str], None] = print,
    ) -> None:
        self.plan = plan
        self.database_url = database_url
        self.work_dir = work_dir
        self.log = log
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("HOOKLATCH_", "DATABASE_URL", "REDIS_URL"))
        }
        self.env.update(
            DATABASE_URL=database_url,
            REDIS_URL=redis_url,
            HOOKLATCH_SECRET_KEYS=Fernet.generate_key().decode(),
            HOOKLATCH_QUEUE=f"hooklatch-chaos-{uuid.uuid4().hex[:8]}",
            HOOKLATCH_HANDLERS="bench.handlers.record",
            HOOKLATCH_DISPATCH_GRACE_SECONDS=str(plan.grace_seconds),
            HOOKLATCH_SWEEP_INTERVAL_SECONDS=str(plan.sweep_seconds),
            BENCH_HANDLER_SECONDS=str(plan.handler_seconds),
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
        )
        self.procs = Procs(work_dir)
        self.ports: dict[str, int] = {}
        self.endpoint_id = ""
        self._killing = threading.Lock()
        self._answering = threading.Lock()

    # -- set-up -----------------------------------------------------------------------

    def prepare(self) -> None:
        import subprocess

        with (self.work_dir / "migrations.log").open("ab") as output:
            subprocess.run(
                [str(BIN / "hooklatch"), "db", "upgrade"],
                env=self.env,
                check=True,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self.endpoint_id = load.stripe_endpoint(self.env, "chaos")

    def start(self, name: str) -> Proc:
        role = name.split("-")[0]
        if role == "web":
            port = self.ports.setdefault(name, free_port())
            env = {
                **self.env,
                "HOST": "127.0.0.1",
                "PORT": str(port),
                "WEB_CONCURRENCY": str(self.plan.web_workers),
            }
            return self.procs.start(
                name, [str(BIN / "gunicorn"), "wsgi:app", "-c", "gunicorn.conf.py"], env
            )
        return self.procs.start(name, [str(BIN / "hooklatch"), role], self.env)

    def kill_and_restart(self, proc: Proc) -> None:
        kill_tree(proc.pid)
        proc.popen.wait(10)
        self.procs.running.remove(proc)
        self.start(proc.name)

    # -- the run ----------------------------------------------------------------------

    def run(self) -> ChaosResult:
        plan = self.plan
        result = ChaosResult(plan.events, plan.sends, bound_seconds=plan.bound_seconds)
        self.prepare()
        names = (
            [f"web-{n}" for n in range(plan.web)]
            + [f"relay-{n}" for n in range(plan.relays)]
            + [f"worker-{n}" for n in range(plan.workers)]
        )
        try:
            for name in names:
                proc = self.start(name)
                if name.startswith("web"):
                    wait_http(f"http://127.0.0.1:{self.ports[name]}/healthz", proc)
            stop_killing = threading.Event()
            killer = threading.Thread(target=self._kill_at_random, args=(stop_killing, result))
            killer.start()
            try:
                result.unanswered = self._send_all()
            finally:
                stop_killing.set()
                killer.join()
            last_kill = result.kills[-1][0] if result.kills else time.monotonic()
            result.recovery_seconds = self._wait_processed(last_kill, plan.bound_seconds)
            time.sleep(2 * plan.sweep_seconds)  # a second run of any handler would show by now
            self._collect(result)
        finally:
            self.procs.stop_all()
        result.redispatched = sum(
            int(found)
            for path in self.work_dir.glob("relay-*.log")
            for found in REDISPATCHED.findall(path.read_text(errors="replace"))
        )
        return result

    def _kill_at_random(self, stop: threading.Event, result: ChaosResult) -> None:
        while not stop.wait(random.uniform(*self.plan.kill_every)):
            with self._killing:
                victim = random.choice(self.procs.running)
                self.kill_and_restart(victim)
                result.kills.append((time.monotonic(), victim.name))

    def _send_all(self) -> list[str]:
        plan = self.plan
        signed = load.signed_batch(f"chaos_{uuid.uuid4().hex[:6]}", plan.events)
        sends = [item for item in signed for _ in range(plan.sends)]
        random.shuffle(sends)
        answered: set[str] = set()
        started = time.monotonic()
        spacing = plan.send_seconds / len(sends)

        def send(position: int, item: load.Signed) -> None:
            time.sleep(max(0.0, started + position * spacing - time.monotonic()))
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                port = self.ports[f"web-{random.randrange(plan.web)}"]
                try:
                    response = requests.post(
                        f"http://127.0.0.1:{port}/hooks/{self.endpoint_id}",
                        data=item.body,
                        headers={
                            "Content-Type": "application/json",
                            "Stripe-Signature": item.signature,
                        },
                        timeout=10,
                    )
                except requests.RequestException:  # that server was killed: another one
                    time.sleep(0.05)
                    continue
                if response.status_code == 200:
                    with self._answering:
                        answered.add(item.external_id)
                    return
                if response.status_code not in (502, 503):
                    raise BenchError(f"{item.external_id}: {response.status_code} {response.text}")
                time.sleep(0.1)

        with ThreadPoolExecutor(max_workers=16) as pool:
            for future in [pool.submit(send, n, item) for n, item in enumerate(sends)]:
                future.result()
        return sorted({item.external_id for item in signed} - answered)

    def _wait_processed(self, since: float, bound: float) -> float | None:
        deadline = since + bound
        while time.monotonic() < deadline:
            [(processed, waiting)] = psql(
                self.database_url,
                "SELECT (SELECT count(*) FROM events WHERE status = 'processed'),"
                " (SELECT count(*) FROM outbox)",
            )
            if processed == self.plan.events and waiting == 0:
                return time.monotonic() - since
            time.sleep(0.1)
        return None

    def _collect(self, result: ChaosResult) -> None:
        result.statuses = Counter(
            {
                str(status): int(n)
                for status, n in psql(
                    self.database_url, "SELECT status, count(*) FROM events GROUP BY status"
                )
            }
        )
        result.runs = Counter(
            {
                str(external_id): int(n)
                for external_id, n in psql(
                    self.database_url,
                    "SELECT external_id, count(*) FROM bench_handler_runs GROUP BY external_id",
                )
            }
        )


def run(
    plan: ChaosPlan,
    database_url: str,
    redis_url: str,
    work_dir: Path,
    log: Callable[[str], None] = print,
) -> ChaosResult:
    return Chaos(plan, database_url, redis_url, work_dir, log).run()


def main() -> None:
    import argparse
    import tempfile

    from bench.procs import scratch_database

    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    parser.add_argument("--events", type=int, default=ChaosPlan.events)
    parser.add_argument("--sends", type=int, default=ChaosPlan.sends)
    parser.add_argument("--seconds", type=float, default=ChaosPlan.send_seconds)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--grace", type=float, default=ChaosPlan.grace_seconds)
    parser.add_argument("--sweep", type=float, default=ChaosPlan.sweep_seconds)
    args = parser.parse_args()
    plan = ChaosPlan(
        events=args.events,
        sends=args.sends,
        send_seconds=args.seconds,
        grace_seconds=args.grace,
        sweep_seconds=args.sweep,
    )
    admin_url = os.environ.get(
        "BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    redis_url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    failed = 0
    for n in range(1, args.runs + 1):
        with (
            tempfile.TemporaryDirectory(prefix="hooklatch-chaos-") as scratch,
            scratch_database(admin_url) as database_url,
        ):
            result = run(plan, database_url, redis_url, Path(scratch), log=lambda _: None)
        problems = result.problems
        failed += bool(problems)
        print(f"run {n}: {'FAILED' if problems else 'passed'}: {result.summary()}", flush=True)
        for problem in problems:
            print(f"  - {problem}", flush=True)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
