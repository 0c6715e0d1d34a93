"""Running the `hooklatch` command in the test process, configured as a user would."""

from __future__ import annotations

from collections.abc import Sequence

from click.testing import CliRunner, Result

from hooklatch.cli import main
from hooklatch.settings import Settings

PUBLIC_URL = "https://hooks.example.com"


def cli_env(
    settings: Settings, *, keys: Sequence[str] | None = None, public_url: str = PUBLIC_URL
) -> dict[str, str]:
    """The environment of a command run against ``settings`` (with ``keys``, other keys;
    with ``public_url``, where the endpoints' URLs start)."""
    env = {
        "DATABASE_URL": settings.database_url or "",
        "HOOKLATCH_SECRET_KEYS": ",".join(settings.secret_keys if keys is None else keys),
        "HOOKLATCH_PUBLIC_URL": public_url,
        "HOOKLATCH_QUEUE": settings.queue_name,
    }
    if settings.redis_url:
        env["REDIS_URL"] = settings.redis_url
    return env


def run_cli(
    settings: Settings,
    *args: str,
    keys: Sequence[str] | None = None,
    input: str | None = None,
    ok: bool = True,
    public_url: str = PUBLIC_URL,
) -> Result:
    """Run ``hooklatch ARGS``; with ``ok``, it must exit 0."""
    env = cli_env(settings, keys=keys, public_url=public_url)
    result = CliRunner().invoke(main, list(args), env=env, input=input, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result
