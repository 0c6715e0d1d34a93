import os
import secrets
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from hooklatch.settings import Settings, SettingsError, check_retention
from tests.support.tokens import ADMIN_TOKEN, METRICS_TOKEN


def test_defaults_are_the_embedded_receiver(tmp_path):
    settings = Settings.from_env({"HOOKLATCH_INSTANCE_PATH": str(tmp_path)})
    assert settings.embedded
    assert settings.sqlalchemy_url == f"sqlite:///{tmp_path}/hooklatch.sqlite3"
    assert settings.max_body_bytes == 5 * 1024 * 1024
    assert settings.worker_body_bytes == 32 * 1024 * 1024


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DATABASE_URL": "postgresql://db/x"}, "HOOKLATCH_SECRET_KEYS is required"),
        ({"HOOKLATCH_SECRET_KEYS": "not-a-key"}, "key 1 is not a valid Fernet key"),
        ({"HOOKLATCH_MAX_BODY_BYTES": "lots"}, "HOOKLATCH_MAX_BODY_BYTES must be a whole number"),
        ({"HOOKLATCH_MAX_BODY_BYTES": "0"}, "must be at least 1"),
        ({"HOOKLATCH_MAX_ATTEMPTS": "0"}, "HOOKLATCH_MAX_ATTEMPTS must be at least 1"),
        ({"DATABASE_URL": "oracle://x"}, "DATABASE_URL must be"),
        ({"REDIS_URL": "localhost:6379"}, "REDIS_URL must be"),
        ({"HOOKLATCH_PUBLIC_URL": "hooks.example.com"}, "HOOKLATCH_PUBLIC_URL must start"),
        ({"HOOKLATCH_RETRY_BASE_SECONDS": "-1"}, "must not be negative"),
        ({"HOOKLATCH_DEDUPE_RETENTION_DAYS": "0"}, "must be more than 0"),
        ({"HOOKLATCH_PAYLOAD_RETENTION_DAYS": "0"}, "must be more than 0"),
        (
            {"HOOKLATCH_PAYLOAD_RETENTION_DAYS": "40"},
            "HOOKLATCH_PAYLOAD_RETENTION_DAYS=40 is longer than HOOKLATCH_DEDUPE_RETENTION_DAYS=30",
        ),
        ({"HOOKLATCH_CLEANUP_BATCH_SIZE": "0"}, "HOOKLATCH_CLEANUP_BATCH_SIZE must be at least 1"),
        ({"HOOKLATCH_WORKER_MAX_JOBS": "0"}, "HOOKLATCH_WORKER_MAX_JOBS must be at least 1"),
        ({"HOOKLATCH_WORKER_BODY_BYTES": "32MiB"}, "HOOKLATCH_WORKER_BODY_BYTES must be a whole"),
        (
            {"HOOKLATCH_WORKER_BODY_BYTES": "32"},
            "HOOKLATCH_WORKER_BODY_BYTES must be at least 65536, got 32",
        ),
        (
            {"HOOKLATCH_ADMIN_PROXY_HEADER": "X-Forwarded-Email"},
            "HOOKLATCH_ADMIN_PROXY_HEADER needs HOOKLATCH_ADMIN_PROXY_IPS",
        ),
        ({"HOOKLATCH_ADMIN_PROXY_IPS": "not-an-address"}, "is not an address or a network"),
        ({"HOOKLATCH_REPLAY_BATCH_RATE": "0.1"}, "must be from 0.2 to 10000"),
        (
            {"HOOKLATCH_REPLAY_BATCH_WINDOW": "0"},
            "HOOKLATCH_REPLAY_BATCH_WINDOW must be at least 1",
        ),
        (
            {"HOOKLATCH_REPLAY_BATCH_WINDOW": "many"},
            "HOOKLATCH_REPLAY_BATCH_WINDOW must be a whole",
        ),
        ({"HOOKLATCH_AUDIT_RETENTION_DAYS": "1000000"}, "must be at most 36500 days"),
        ({"HOOKLATCH_QUEUED_JOBS": "0"}, "HOOKLATCH_QUEUED_JOBS must be at least 1"),
        ({"HOOKLATCH_UNSAFE_SHORT_RETENTION": "maybe"}, "must be true or false"),
        (
            {"HOOKLATCH_RELAY_METRICS_PORT": "70000"},
            "HOOKLATCH_RELAY_METRICS_PORT must be a port, got 70000",
        ),
        (
            {"HOOKLATCH_WORKER_METRICS_PORT": "70000"},
            "HOOKLATCH_WORKER_METRICS_PORT must be a port, got 70000",
        ),
        ({"HOOKLATCH_METRICS_ADDRESS": "localhost"}, "HOOKLATCH_METRICS_ADDRESS must be an IP"),
        (
            {"HOOKLATCH_METRICS_PORT": "9101"},
            "HOOKLATCH_METRICS_PORT is no longer read: set HOOKLATCH_RELAY_METRICS_PORT for "
            "relays and HOOKLATCH_WORKER_METRICS_PORT for workers",
        ),
        ({"HOOKLATCH_PAYLOAD_RETENTION_DAYS": "nan"}, "must be a finite number, got 'nan'"),
        ({"HOOKLATCH_DEDUPE_RETENTION_DAYS": "inf"}, "must be a finite number, got 'inf'"),
        ({"HOOKLATCH_HEARTBEAT_SECONDS": "0"}, "HOOKLATCH_HEARTBEAT_SECONDS must be more than 0"),
        (
            {"HOOKLATCH_CLEANUP_INTERVAL_SECONDS": "0"},
            "HOOKLATCH_CLEANUP_INTERVAL_SECONDS must be more than 0",
        ),
        ({"HOOKLATCH_METRICS_CACHE_SECONDS": "0"}, "HOOKLATCH_METRICS_CACHE_SECONDS must be more"),
        (
            {"HOOKLATCH_ADMIN_LOCKOUT_FAILURES": "0"},
            "HOOKLATCH_ADMIN_LOCKOUT_FAILURES must be at least 1",
        ),
        (
            {"HOOKLATCH_ADMIN_LOCKOUT_WINDOW_SECONDS": "0"},
            "HOOKLATCH_ADMIN_LOCKOUT_WINDOW_SECONDS must be more than 0",
        ),
        ({"HOOKLATCH_ADMIN_LOCKOUT_SECONDS": "0"}, "HOOKLATCH_ADMIN_LOCKOUT_SECONDS must be more"),
        ({"HOOKLATCH_ADMIN_LOCKOUT_SECONDS": "1e12"}, "must be at most 36500 days"),
        (
            {"HOOKLATCH_FORWARD_LEASE_SECONDS": "15", "HOOKLATCH_FORWARD_TIMEOUT_SECONDS": "10"},
            "HOOKLATCH_FORWARD_LEASE_SECONDS must be at least twice",
        ),
        ({"HOOKLATCH_FORWARD_POLL_SECONDS": "0"}, "HOOKLATCH_FORWARD_POLL_SECONDS must be more"),
        ({"HOOKLATCH_FORWARD_MAX_ATTEMPTS": "0"}, "HOOKLATCH_FORWARD_MAX_ATTEMPTS must be at"),
    ],
)
def test_bad_settings_fail_fast_naming_the_variable(env, message):
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_the_metrics_token_is_read_and_kept_out_of_the_repr():
    settings = Settings.from_env({"HOOKLATCH_METRICS_TOKEN": METRICS_TOKEN})
    assert settings.metrics_token == METRICS_TOKEN
    assert METRICS_TOKEN not in repr(settings)


@pytest.mark.parametrize("name", ["HOOKLATCH_ADMIN_TOKEN", "HOOKLATCH_METRICS_TOKEN"])
@pytest.mark.parametrize(
    "weak",
    [
        "Z",  # one character
        "admintoken",
        "s3cr3t-t0ken-for-the-admin-api",  # 30 characters
        "z" * 64,
        "Qx7!" * 10,  # a few characters, repeated
        "0123456789abcdef" * 2,  # 32, but twice the same 16
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabbbbbbbc",  # 3 different characters
    ],
)
def test_a_weak_token_is_refused_at_start_by_name_without_showing_it(name, weak):
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({name: weak})
    message = str(refused.value)
    assert message.startswith(f"{name} is too weak: it must be at least 32 characters")
    assert 'python -c "import secrets; print(secrets.token_urlsafe(32))"' in message
    assert weak not in message


def test_a_random_token_of_32_characters_or_more_is_accepted():
    for token in (
        secrets.token_urlsafe(32),
        secrets.token_urlsafe(24),  # 32 characters
        secrets.token_hex(16),  # 32 hex digits
        ADMIN_TOKEN,
    ):
        assert Settings.from_env({"HOOKLATCH_ADMIN_TOKEN": token}).admin_token == token


def test_secrets_never_appear_in_the_settings_repr():
    key = Fernet.generate_key().decode()
    settings = Settings.from_env(
        {
            "DATABASE_URL": "postgresql://app:hunter2@db/x",
            "REDIS_URL": "redis://:redispw@cache:6379/0",
            "HOOKLATCH_SECRET_KEYS": key,
            "HOOKLATCH_ADMIN_TOKEN": ADMIN_TOKEN,
        }
    )
    text = repr(settings)
    for secret in (key, "hunter2", "redispw", ADMIN_TOKEN):
        assert secret not in text


def test_embedded_default_generates_and_keeps_one_key(tmp_path):
    settings = Settings.from_env({"HOOKLATCH_INSTANCE_PATH": str(tmp_path)})
    first = settings.with_embedded_key().secret_keys
    again = settings.with_embedded_key().secret_keys
    assert first == again and len(first) == 1
    assert (tmp_path / "secret.key").stat().st_mode & 0o777 == 0o600


def test_mysql_is_refused_clearly_until_it_is_supported():
    with pytest.raises(SettingsError, match="postgresql:// or sqlite://"):
        Settings.from_env({"DATABASE_URL": "mysql://root@localhost/x"})


def test_prepared_statements_flag_reads_true_and_false_and_refuses_the_rest():
    key = Fernet.generate_key().decode()
    base = {"DATABASE_URL": "postgresql://db/x", "HOOKLATCH_SECRET_KEYS": key}
    assert Settings.from_env(base).prepare_statements is True
    off = Settings.from_env({**base, "HOOKLATCH_PREPARE_STATEMENTS": "off"})
    assert off.prepare_statements is False
    with pytest.raises(SettingsError, match="HOOKLATCH_PREPARE_STATEMENTS"):
        Settings.from_env({**base, "HOOKLATCH_PREPARE_STATEMENTS": "sometimes"})


def test_ingest_connections_are_read_and_at_least_one():
    key = Fernet.generate_key().decode()
    base = {"DATABASE_URL": "postgresql://db/x", "HOOKLATCH_SECRET_KEYS": key}
    assert Settings.from_env(base).ingest_connections == 3
    assert Settings.from_env({**base, "HOOKLATCH_INGEST_CONNECTIONS": "8"}).ingest_connections == 8
    with pytest.raises(SettingsError, match="HOOKLATCH_INGEST_CONNECTIONS"):
        Settings.from_env({**base, "HOOKLATCH_INGEST_CONNECTIONS": "0"})


def test_the_payload_clock_defaults_to_a_week_and_follows_a_shorter_dedupe_clock_down():
    assert Settings.from_env({}).payload_retention_days == 7
    assert Settings.from_env({}).dedupe_retention_days == 30
    short = Settings.from_env({"HOOKLATCH_DEDUPE_RETENTION_DAYS": "5"})
    assert short.payload_retention_days == 5
    chosen = Settings.from_env({"HOOKLATCH_PAYLOAD_RETENTION_DAYS": "0.5"})
    assert chosen.payload_retention_days == 0.5


class _ThreeDays:
    retry_window = timedelta(days=3)


def test_short_retention_may_be_forced_only_with_clocks_of_test_setups():
    """HOOKLATCH_UNSAFE_SHORT_RETENTION lets a clock in seconds or minutes start (a soak,
    a staging setup), never one a deployment could mean: from an hour up, a dedupe clock
    shorter than a provider's retry window stays refused."""
    minutes = Settings(dedupe_retention_days=10 / 1440, unsafe_short_retention=True)
    check_retention(minutes, {"stripe": _ThreeDays()})
    for days in (1 / 24, 2):
        forced = Settings(dedupe_retention_days=days, unsafe_short_retention=True)
        with pytest.raises(SettingsError, match="only for dedupe clocks under an hour"):
            check_retention(forced, {"stripe": _ThreeDays()})


def test_replays_have_a_queue_named_after_the_live_one_and_a_window_of_a_hundred():
    assert Settings.from_env({}).replay_batch_window == 100
    assert Settings.from_env({"HOOKLATCH_REPLAY_BATCH_WINDOW": "20"}).replay_batch_window == 20
    chosen = Settings.from_env({"HOOKLATCH_QUEUE": "hooks"})
    assert (chosen.queue_name, chosen.replay_queue_name) == ("hooks", "hooks-replays")


def test_handler_modules_are_looked_for_in_the_working_directory_unless_told_otherwise(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert Settings.from_env({}).handlers_path == (tmp_path,)
    assert Settings.from_env({"HOOKLATCH_HANDLERS_PATH": ""}).handlers_path == ()
    both = Settings.from_env({"HOOKLATCH_HANDLERS_PATH": f"src{os.pathsep} /srv/hooks "})
    assert both.handlers_path == (tmp_path / "src", Path("/srv/hooks"))


def test_relays_and_workers_serve_metrics_on_this_host_only_unless_told():
    assert Settings.from_env({}).metrics_address == "127.0.0.1"
    given = Settings.from_env(
        {
            "HOOKLATCH_METRICS_ADDRESS": "10.0.0.5",
            "HOOKLATCH_RELAY_METRICS_PORT": "9101",
            "HOOKLATCH_WORKER_METRICS_PORT": "9102",
            "HOOKLATCH_METRICS_PORT": "",
        }
    )
    assert (given.metrics_address, given.relay_metrics_port, given.worker_metrics_port) == (
        "10.0.0.5",
        9101,
        9102,
    )
