"""Every environment variable hooklatch reads, with its default as shown to people and
what it means: the one place they are written down. docs/configuration.md is made from
this table (``python -m hooklatch.settings_reference docs/configuration.md``, which
``make docs`` runs), and a test fails when a variable read in app/ or workers/ is
missing here, when a row names one that nothing reads, or when the committed page
differs from what this module writes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    name: str
    default: str  # Markdown, as people should read it: "`8`", "unset: not served"
    meaning: str  # Markdown, one paragraph (no "|": it is a table cell)


@dataclass(frozen=True)
class Section:
    title: str
    intro: str
    settings: tuple[Setting, ...]


SECTIONS = (
    Section(
        "Where things are",
        "The database, Redis, the keys that encrypt endpoint secrets, and your handlers.",
        (
            Setting(
                "DATABASE_URL",
                "unset: SQLite at `./instance/hooklatch.sqlite3`",
                "`postgresql://` (or `postgres://`) URL; the driver is psycopg2.",
            ),
            Setting(
                "REDIS_URL",
                "unset: handlers run inside the web process",
                "`redis://`, `rediss://` or `unix://` URL. `hooklatch worker` refuses to start "
                "without it.",
            ),
            Setting(
                "HOOKLATCH_SECRET_KEYS",
                "generated into `instance/secret.key` when `DATABASE_URL` is unset",
                "Fernet keys, comma-separated, that encrypt endpoint secrets at rest. The first "
                "encrypts, all decrypt. Make one with `hooklatch keys generate`. Required once "
                "`DATABASE_URL` is set. Rotating it: [Security](security.md#keys).",
            ),
            Setting(
                "HOOKLATCH_PUBLIC_URL",
                "`http://127.0.0.1:8000`",
                "Base of the URLs that `hooklatch endpoints add` prints and `hooklatch "
                "send-test` posts to. Set it to the public address providers reach.",
            ),
            Setting(
                "HOOKLATCH_HANDLERS",
                "none",
                "Comma-separated modules that register handlers, imported at start by every "
                "process, from `HOOKLATCH_HANDLERS_PATH` or the installed packages. A module "
                "that is not found stops the process with one line saying where it was looked "
                "for; one that fails to import stops it with its traceback.",
            ),
            Setting(
                "HOOKLATCH_HANDLERS_PATH",
                "the working directory the process starts in",
                "Folders, separated by `:` (`;` on Windows), in which the modules of "
                "`HOOKLATCH_HANDLERS` are looked for, as `rq worker --path` and uvicorn's "
                "`--app-dir` do; a relative one is read from the working directory. Set but "
                "empty: none, only the installed packages. The folders come after the "
                "standard library and the installed packages, so a project's `logging.py` or "
                "`redis.py` never replaces theirs; a handler module named like an installed one "
                "stops the process, saying so (rename it). That holds for the web process "
                "too: gunicorn puts its working directory first on the import path (to import "
                "`wsgi.py`), and its settings module moves it last, then off before the handler "
                "modules are looked for.",
            ),
            Setting(
                "PYTHONPATH",
                "unset",
                "Python's own: the folders it names come first on the import path of every "
                "process, gunicorn's too (and gunicorn's `--pythonpath`), even its working "
                "directory; their modules do replace the standard library's and the installed "
                "packages' of the same names.",
            ),
            Setting(
                "HOOKLATCH_INSTANCE_PATH",
                "`./instance`",
                "Where the embedded default keeps SQLite and its key.",
            ),
            Setting(
                "HOOKLATCH_QUEUE",
                "`hooklatch`",
                "RQ queue name. Events a reconcile fetched go to a queue of their own, this "
                "name followed by `-fetched`, and replays to another, followed by `-replays`: "
                "workers read them after it, in that order.",
            ),
        ),
    ),
    Section(
        "Ingest",
        "How the web process takes deliveries on `POST /hooks/<endpoint-id>`.",
        (
            Setting(
                "HOOKLATCH_MAX_BODY_BYTES",
                "`5242880` (5 MiB)",
                "Larger requests get 413. GitHub payloads can reach 25 MB: raise it if you "
                "receive large pushes (a work horse running 25 MB bodies peaked at 255 MiB, "
                "see `HOOKLATCH_WORKER_BODY_BYTES`). The limit is the same for every endpoint.",
            ),
            Setting(
                "HOOKLATCH_INGEST_CONNECTIONS",
                "`3`",
                "Database connections each web worker stores deliveries on (PostgreSQL). More "
                "deliveries than that at once wait for one, up to 5 s, then are answered 503 "
                "`store_unavailable` (logged as `all N ingest connections stayed busy`) and "
                "retried by the provider. Refusal counts are written on them too, a few times "
                "per flush interval; counts that find none free are kept for the next write. "
                "Raise it when the database has cores to spare.",
            ),
            Setting(
                "HOOKLATCH_PREPARE_STATEMENTS",
                "`true`",
                "Ingest connections prepare their storing statement once (PostgreSQL). Set "
                "`false` behind a connection pooler in transaction mode (PgBouncer at any "
                "version tracks protocol-level prepared statements only, not SQL `PREPARE`). "
                "A connection whose statement vanished anyway is replaced and the delivery "
                "retried once.",
            ),
            Setting(
                "HOOKLATCH_REFUSAL_FLUSH_SECONDS",
                "`2`",
                "Refused deliveries are counted in each web process's memory: the first ten "
                "are written at once, then at most one write per this many seconds per "
                "process, and the rest when the process exits. `hooklatch endpoints show` is "
                "this far behind at most. `0` writes every refusal as it happens.",
            ),
        ),
    ),
    Section(
        "Retries and dispatch",
        "How events go from the outbox to workers, and how often a failing one is tried "
        "([Handlers](handlers.md#retries-and-dead-events)).",
        (
            Setting("HOOKLATCH_MAX_ATTEMPTS", "`8`", "Attempts before an event is marked `dead`."),
            Setting(
                "HOOKLATCH_RETRY_BASE_SECONDS",
                "`60`",
                "Backoff base: attempt *n* failing waits between half and all of "
                "`base * 2^(n-1)` seconds.",
            ),
            Setting(
                "HOOKLATCH_RETRY_MAX_SECONDS",
                "`21600` (6 h)",
                "Cap on one backoff. Must not be smaller than the base.",
            ),
            Setting("HOOKLATCH_JOB_SIZE", "`1000`", "Event ids per RQ job, at most."),
            Setting(
                "HOOKLATCH_QUEUED_JOBS",
                "`1`",
                "The relay hands out new work to a queue only while fewer jobs than this wait "
                "in it (the live, fetched and replay queues each on its own); meanwhile events "
                "wait in the outbox and go out together, so jobs grow with the workers' lag "
                "instead of one per 50 ms poll.",
            ),
            Setting(
                "HOOKLATCH_RELAY_POLL_SECONDS",
                "`0.05`",
                "How often each relay looks for new events: at most this much is added "
                "between commit and handler start. An empty look is one index scan.",
            ),
            Setting(
                "HOOKLATCH_SWEEP_INTERVAL_SECONDS",
                "`5`",
                "How often each relay looks for due retries and lost jobs.",
            ),
            Setting(
                "HOOKLATCH_DISPATCH_GRACE_SECONDS",
                "`10`",
                "Work handed out less than this long ago is never re-dispatched. With the "
                "sweep interval, it bounds how long a killed process can hold up an event: "
                "grace + 2 sweep intervals.",
            ),
            Setting(
                "HOOKLATCH_MAX_LOST_DISPATCHES",
                "`3`",
                "Times an event's job may die under it (the process killed, out of memory, a "
                "job timeout) before the event is marked `dead`.",
            ),
        ),
    ),
    Section(
        "Worker",
        "`hooklatch worker` and the work horse it forks.",
        (
            Setting(
                "HOOKLATCH_WORKER_STOP_SECONDS",
                "`20`",
                "A worker given SIGTERM finishes the chunk of events under way (at most 200, "
                "or what 250 ms held) and hands the rest of its job back to the relay; a chunk "
                "still running after this long is cut short: its transaction rolls back and "
                "its events run again later (`--simple` waits for the chunk). Keep it under "
                "your orchestrator's kill timeout (Kubernetes: 30 s).",
            ),
            Setting(
                "HOOKLATCH_WORKER_MAX_JOBS",
                "`500`",
                "Jobs a worker's work horse runs before the worker replaces it with a new one "
                "(one fork): memory a handler leaks is given back then.",
            ),
            Setting(
                "HOOKLATCH_WORKER_BODY_BYTES",
                "`33554432` (32 MiB)",
                "Bodies and headers a worker reads at once, as its events run: a chunk of "
                "small events is one read, a larger body is read alone. A work horse's peak "
                "memory is at most about 60 MiB plus the larger of 4 × this (or 4 × the "
                "largest body) and this plus 7 × the largest body, whatever its jobs hold: "
                "190 MiB at the defaults "
                "([Architecture](architecture.md#what-a-work-horse-holds)). At least 65536.",
            ),
        ),
    ),
    Section(
        "Retention",
        "What the database keeps, and for how long ([Operating](operating.md#retention)).",
        (
            Setting(
                "HOOKLATCH_DEDUPE_RETENTION_DAYS",
                "`30`",
                "After this long an event's row goes, with its attempts and replays: a "
                "delivery of the same id afterwards is a new event. Refused at start when "
                "shorter than an installed provider's retry window. A reconcile run asks for "
                "nothing older.",
            ),
            Setting(
                "HOOKLATCH_PAYLOAD_RETENTION_DAYS",
                "`7` (or the dedupe clock, if shorter)",
                "After this long a processed or ignored event's body and headers are deleted; "
                "its row and dedupe key stay. Must not exceed the dedupe clock.",
            ),
            Setting("HOOKLATCH_CLEANUP_BATCH_SIZE", "`5000`", "Rows per cleanup statement."),
            Setting(
                "HOOKLATCH_CLEANUP_INTERVAL_SECONDS",
                "`5`",
                "Pause between two cleanup passes in each relay (a pass runs until nothing "
                "expired is left).",
            ),
            Setting(
                "HOOKLATCH_UNSAFE_SHORT_RETENTION",
                "`false`",
                "Start even when the dedupe clock is shorter than a provider's retry window "
                "(logged as a warning): for test and staging setups whose clocks run in "
                "seconds or minutes. A late retry of a deleted event is then handled again. A "
                "dedupe clock of an hour or more stays refused whatever it says.",
            ),
            Setting("HOOKLATCH_AUDIT_RETENTION_DAYS", "`365`", "How long audit entries are kept."),
        ),
    ),
    Section(
        "Metrics, status and logs",
        "[Operating](operating.md) says what each shows.",
        (
            Setting(
                "HOOKLATCH_METRICS_TOKEN",
                "unset",
                "Bearer token that may read `GET /metrics` and nothing else (the admin token "
                "may too). With neither set, `/metrics` answers 401 `metrics_disabled`. As "
                "strong as the admin token must be.",
            ),
            Setting(
                "HOOKLATCH_RELAY_METRICS_PORT",
                "unset: not served",
                "Port on which each `hooklatch relay` serves its metrics (`GET /metrics`, no "
                "token), at `HOOKLATCH_METRICS_ADDRESS`. A port that is taken stops the relay "
                "with one line naming this setting. Replaces `HOOKLATCH_METRICS_PORT`, which "
                "relays and workers both took: a process given that one stops at start.",
            ),
            Setting(
                "HOOKLATCH_WORKER_METRICS_PORT",
                "unset: not served",
                "Port on which each `hooklatch worker` serves its metrics and its work "
                "horses' (no token), at `HOOKLATCH_METRICS_ADDRESS`. Each worker of a host "
                "needs a port of its own: a second worker given a port in use stops with one "
                "line naming this setting (give each its own, as the systemd unit's instance "
                "name can, or leave it unset on all but one).",
            ),
            Setting(
                "HOOKLATCH_METRICS_ADDRESS",
                "`127.0.0.1`",
                "The IP address the relay's and worker's metrics ports listen on: by default "
                "this host only. Set it to the host's address on a private network that "
                "Prometheus reaches (`0.0.0.0`: every address); these ports ask for no token, "
                "so never one the internet reaches.",
            ),
            Setting(
                "HOOKLATCH_METRICS_CACHE_SECONDS",
                "`5`",
                "The database gauges of `/metrics` are read this often at most, in the "
                "background: a scrape never waits for a query.",
            ),
            Setting(
                "PROMETHEUS_MULTIPROC_DIR",
                "unset: `gunicorn.conf.py` and each worker make a directory of their own "
                "(removed at exit)",
                "Where gunicorn's workers, and a worker's work horses, keep their counts for "
                "a scrape to add up. Set, it is emptied when gunicorn starts. Give each "
                "gunicorn and each worker its own directory, or none.",
            ),
            Setting(
                "HOOKLATCH_METRICS_DIR_MADE",
                "set by `gunicorn.conf.py` itself",
                "The metrics directory `gunicorn.conf.py` made, so that a reload (SIGHUP) "
                "knows to remove it at exit. Never set it yourself.",
            ),
            Setting(
                "HOOKLATCH_HEARTBEAT_SECONDS",
                "`5`",
                "How often relays and workers write their heartbeat row; `hooklatch status` "
                "calls a process silent after three missed beats.",
            ),
            Setting(
                "HOOKLATCH_LOG_FORMAT",
                "`text`",
                "`text`: one line per record, for people; `json`: one JSON object per record, "
                "for a log pipeline ([Operating](operating.md#logs)). Any other value stops "
                "the process at start.",
            ),
        ),
    ),
    Section(
        "Admin API and console",
        "Who may use `/admin/...` and the console ([Security](security.md), "
        "[Console](console.md#who-may-use-it)).",
        (
            Setting(
                "HOOKLATCH_ADMIN_TOKEN",
                "unset: the admin API answers 401 `admin_disabled`",
                "Bearer token for `/admin/...`, and the console's sign-in. At least 32 "
                "characters and of at least 8 different characters, random, not a few "
                "characters repeated: a weaker one stops every process at start. Make one "
                'with `python -c "import secrets; print(secrets.token_urlsafe(32))"`.',
            ),
            Setting("HOOKLATCH_ADMIN_SESSION_HOURS", "`8`", "How long a console sign-in lasts."),
            Setting(
                "HOOKLATCH_ADMIN_PROXY_HEADER",
                "unset",
                "The request header in which a reverse proxy that signs people in names them "
                "(`X-Forwarded-Email`): the console then needs no token.",
            ),
            Setting(
                "HOOKLATCH_ADMIN_PROXY_IPS",
                "unset (required with the header)",
                "The addresses (or networks) of the proxy that signs people in: its header is "
                "trusted from them only.",
            ),
            Setting(
                "HOOKLATCH_TRUSTED_PROXIES",
                "`127.0.0.1,::1`",
                "Reverse proxies in front of the web process whose `X-Forwarded-For` names "
                "the client: only to tell clients apart (failed admin-token attempts, the "
                "address in the audit log), never to trust one. Empty: the direct peer (one "
                "on a unix socket, which has no address, is still taken as a proxy on this "
                "host).",
            ),
            Setting(
                "HOOKLATCH_ADMIN_LOCKOUT_FAILURES",
                "`10`",
                "Failed admin-token attempts (admin API, `/metrics`, console sign-in) from one "
                "client address within the window that lock it out.",
            ),
            Setting(
                "HOOKLATCH_ADMIN_LOCKOUT_WINDOW_SECONDS",
                "`600`",
                "The window in which those failures are counted.",
            ),
            Setting(
                "HOOKLATCH_ADMIN_LOCKOUT_SECONDS",
                "`900`",
                "How long a locked-out address is refused (429 with `Retry-After`), whatever "
                "token it presents.",
            ),
        ),
    ),
    Section(
        "Reconcile",
        "[Recovering the events a provider never delivered](reconciliation.md).",
        (
            Setting(
                "HOOKLATCH_RECONCILE_INTERVAL_SECONDS",
                "`3600`",
                "How often a relay reconciles each endpoint that has a credential for its "
                "provider's API, and reads back its webhook at the provider; `0`: only by "
                "hand, and no webhook is read back by itself.",
            ),
            Setting(
                "HOOKLATCH_RECONCILE_OVERLAP_SECONDS",
                "`600`",
                "How far before the cursor each run starts again: events the provider's API "
                "showed late are still found.",
            ),
            Setting(
                "HOOKLATCH_RECONCILE_MAX_REQUESTS",
                "`200`",
                "The most API requests one run makes; it stops there, cut short, and the next "
                "run resumes.",
            ),
            Setting(
                "HOOKLATCH_RECONCILE_MAX_PAGES",
                "`150`",
                "The most list pages one run reads (100 items a page).",
            ),
            Setting(
                "HOOKLATCH_RECONCILE_MAX_WAIT_SECONDS",
                "`60`",
                "How long one run may wait out the provider's rate limits (`Retry-After`) "
                "before it stops, cut short.",
            ),
            Setting(
                "HOOKLATCH_RECONCILE_LEASE_SECONDS",
                "`120`",
                "How long a run holds its endpoint without renewing its lease: a relay "
                "killed mid-run gives the endpoint up after this long.",
            ),
            Setting(
                "HOOKLATCH_RECONCILE_QUOTA_RESERVE",
                "`100`",
                "A run stops once the provider says this little of its rate-limit quota is "
                "left (GitHub's `x-ratelimit-remaining`), leaving it to whatever else uses "
                "the credential.",
            ),
        ),
    ),
    Section(
        "Forwarding",
        "[Forwarding events to the systems behind hooklatch](forwarding.md).",
        (
            Setting(
                "HOOKLATCH_FORWARD_POLL_SECONDS",
                "`0.1`",
                "How often a relay's sender looks for a destination's forwards while it has "
                "none to send (a relay looks for destinations no relay sends to every "
                "second, or this often if it is longer).",
            ),
            Setting(
                "HOOKLATCH_FORWARD_MAX_ATTEMPTS",
                "`25`",
                "Attempts at one forward before it is dead (1.3 to 2.6 hours of retries with "
                "the pauses below and their jitter); a dead forward is sent again only by a "
                "replay.",
            ),
            Setting(
                "HOOKLATCH_FORWARD_RETRY_BASE_SECONDS",
                "`1`",
                "The pause after a forward's first failed attempt; it doubles with each "
                "next one (with jitter).",
            ),
            Setting(
                "HOOKLATCH_FORWARD_RETRY_MAX_SECONDS",
                "`600`",
                "The longest pause between two attempts at a forward.",
            ),
            Setting(
                "HOOKLATCH_FORWARD_TIMEOUT_SECONDS",
                "`10`",
                "How long a destination has to acknowledge a message (an HTTP answer, a "
                "JetStream ack, a RabbitMQ confirm), and to accept a connection.",
            ),
            Setting(
                "HOOKLATCH_FORWARD_LEASE_SECONDS",
                "`30`",
                "How long a relay holds a destination without renewing its lease: one relay "
                "sends to a destination at a time, and a relay killed gives it up after this "
                "long (the forwards it had sent unacknowledged are sent again, with the same "
                "key). At least twice `HOOKLATCH_FORWARD_TIMEOUT_SECONDS`: the lease is "
                "renewed between two calls to the destination.",
            ),
        ),
    ),
    Section(
        "Bulk replay",
        "[Replaying many events](console.md#bulk-replay).",
        (
            Setting(
                "HOOKLATCH_REPLAY_BATCH_MAX",
                "`10000`",
                "The most events one bulk replay may touch.",
            ),
            Setting(
                "HOOKLATCH_REPLAY_BATCH_RATE",
                "`50`",
                "Replays a second a bulk replay requests, at most, whatever the number of relays.",
            ),
            Setting(
                "HOOKLATCH_REPLAY_BATCH_WINDOW",
                "`100`",
                "A bulk replay requests replays only while fewer than this many replays (its "
                "own and any other) wait to be run, so little is ever queued ahead of the "
                "workers and a cancel has little to undo.",
            ),
        ),
    ),
    Section(
        "The web process (gunicorn)",
        "Read by `gunicorn.conf.py` (the settings live in the package, "
        "`app/gunicorn_config.py`, which `hooklatch serve` uses too) at start, from the "
        "environment gunicorn started with. A reload (SIGHUP) starts new workers but "
        "changes no setting (the environment is still the one the master started with): "
        "restart the web process to change one.",
        (
            Setting("HOST", "`0.0.0.0`", "The address the web process listens on."),
            Setting("PORT", "`8000`", "The port the web process listens on."),
            Setting(
                "WEB_CONCURRENCY",
                "2 × CPUs with `DATABASE_URL` set; always 1 without it",
                "gunicorn worker processes.",
            ),
            Setting(
                "GUNICORN_WORKER_CLASS",
                "`gevent`; without `DATABASE_URL`, `hooklatch.embedded.worker.PacedThreadWorker`",
                "gunicorn's worker class. gevent workers hold a greenlet, not a worker, for a "
                "client that sends slowly ([Deploying](deploying.md#the-web-process)).",
            ),
            Setting(
                "GUNICORN_THREADS",
                "4 with one gunicorn worker (the embedded default), else 1",
                "Threads per gunicorn worker (the thread worker's; gevent workers ignore it).",
            ),
            Setting(
                "GUNICORN_TIMEOUT",
                "`30`",
                "gunicorn kills and replaces a worker silent for longer than this many seconds.",
            ),
            Setting(
                "GUNICORN_ACCESS_LOG",
                "unset: no access log",
                "The file gunicorn writes its access log to (`-`: standard output).",
            ),
            Setting(
                "GUNICORN_LOG_LEVEL",
                "`warning`",
                "gunicorn's own log level; `info` brings back its start-up and shutdown lines.",
            ),
            Setting(
                "FORWARDED_ALLOW_IPS",
                "`127.0.0.1`",
                "gunicorn's own: the front ends whose scheme headers (`X-Forwarded-Proto`) "
                "it believes.",
            ),
        ),
    ),
    Section(
        "Set for the C library",
        "Not hooklatch's own, but read by it.",
        (
            Setting(
                "MALLOC_MMAP_THRESHOLD_",
                "unset: the work horse fixes glibc's mmap threshold where it starts",
                "Set (or `mmap_threshold` in `GLIBC_TUNABLES`), the work horse leaves glibc's "
                "threshold as the environment says "
                "([Architecture](architecture.md#what-a-work-horse-holds)).",
            ),
            Setting(
                "GLIBC_TUNABLES",
                "unset",
                "Read only for `mmap_threshold`: as `MALLOC_MMAP_THRESHOLD_`.",
            ),
        ),
    ),
)

SETTINGS: tuple[Setting, ...] = tuple(s for section in SECTIONS for s in section.settings)

INTRO = """\
# Configuration

<!-- Made by `python -m hooklatch.settings_reference docs/configuration.md` (make docs)
from app/settings_reference.py: change that table, not this page. -->

Every process (web, worker, relay, the CLI) reads the same environment. A bad value stops
the process at start with a message that names the variable. With `DATABASE_URL` set,
every `hooklatch` command that touches the database refuses to start until
`HOOKLATCH_SECRET_KEYS` is set too; `hooklatch keys generate` needs nothing.
"""


def _cell(text: str) -> str:
    if "|" in text or "\n" in text:
        raise ValueError(f"a table cell cannot hold '|' or a line break: {text!r}")
    return text


def page() -> str:
    """docs/configuration.md, as Markdown."""
    parts = [INTRO]
    for section in SECTIONS:
        parts.append(f"\n## {section.title}\n\n{section.intro}\n\n")
        parts.append("| Variable | Default | Meaning |\n| --- | --- | --- |\n")
        for s in section.settings:
            parts.append(f"| `{s.name}` | {_cell(s.default)} | {_cell(s.meaning)} |\n")
    return "".join(parts)


def main(argv: list[str]) -> int:
    """Print the page, or write it to the path given."""
    if len(argv) > 1:
        print("usage: python -m hooklatch.settings_reference [PATH]", file=sys.stderr)
        return 2
    if argv:
        Path(argv[0]).write_text(page())
    else:
        sys.stdout.write(page())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
