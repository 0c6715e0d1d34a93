"""Secrets reach `hooklatch endpoints` from a file, from stdin or a hidden prompt, so that
they stay out of `ps` and shell history; `--secret VALUE` still works for scripts."""

import json
import shlex

from sqlalchemy import text

from hooklatch.endpoints.service import decrypt_options
from tests.support.cli import run_cli


def cli(settings, command, *more, **options):
    """``hooklatch COMMAND MORE``, the command written as a shell line would say it."""
    return run_cli(settings, *shlex.split(command), *more, **options)


def revealed(settings, name):
    shown = json.loads(run_cli(settings, "endpoints", "show", name, "--reveal").output)
    return shown["secret_values"]


def test_endpoints_add_reads_the_secret_from_a_file(settings, tmp_path):
    path = tmp_path / "secret"
    path.write_text("whsec_from_file\n")
    added = run_cli(
        settings, "endpoints", "add", "stripe", "--name", "f", "--secret-file", str(path)
    )
    assert "whsec_from_file" not in added.output
    assert revealed(settings, "f") == ["whsec_from_file"]


def test_endpoints_add_reads_the_secret_from_stdin(settings):
    added = cli(settings, "endpoints add stripe --name s --secret -", input="whsec_from_stdin\n")
    assert "whsec_from_stdin" not in added.output
    assert revealed(settings, "s") == ["whsec_from_stdin"]


def test_endpoints_add_takes_files_and_values_together(settings, tmp_path):
    path = tmp_path / "secret"
    path.write_text("whsec_b")
    cli(settings, "endpoints add stripe --name both --secret whsec_a --secret-file", str(path))
    assert revealed(settings, "both") == ["whsec_a", "whsec_b"]


def test_secrets_add_reads_a_file_or_stdin(settings, tmp_path):
    run_cli(settings, "endpoints", "add", "stripe", "--name", "r", "--secret", "whsec_old")
    path = tmp_path / "secret"
    path.write_text("whsec_file\r\n")
    by_file = run_cli(settings, "endpoints", "secrets", "add", "r", "--secret-file", str(path))
    by_stdin = run_cli(
        settings, "endpoints", "secrets", "add", "r", "--secret", "-", input="whsec_stdin\n"
    )
    assert "whsec_file" not in by_file.output and "whsec_stdin" not in by_stdin.output
    assert revealed(settings, "r") == ["whsec_old", "whsec_file", "whsec_stdin"]


def test_secrets_add_asks_at_a_hidden_prompt_when_the_provider_chooses_the_secret(settings):
    run_cli(settings, "endpoints", "add", "stripe", "--name", "p")
    added = run_cli(settings, "endpoints", "secrets", "add", "p", input="whsec_typed\n")
    assert "whsec_typed" not in added.output
    assert revealed(settings, "p") == ["whsec_typed"]


def test_secrets_add_still_generates_one_where_the_receiver_chooses(settings):
    run_cli(settings, "endpoints", "add", "github", "--name", "g")
    added = run_cli(settings, "endpoints", "secrets", "add", "g", input="")
    assert "generated secret (shown once)" in added.output
    assert len(revealed(settings, "g")) == 2


def test_a_meta_verify_token_left_out_is_asked_for_at_a_hidden_prompt(settings, runtime, tmp_path):
    path = tmp_path / "app-secret"
    path.write_text("meta-app-secret")
    added = cli(
        settings,
        "endpoints add meta --name m --secret-file",
        str(path),
        input="typed-verify-token\n",
    )
    assert "typed-verify-token" not in added.output
    with runtime.engine.connect() as connection:
        stored = connection.execute(text("SELECT options FROM endpoints")).scalar_one()
    assert decrypt_options(stored, runtime.box) == {"verify_token": "typed-verify-token"}
    assert revealed(settings, "m") == ["meta-app-secret"]


def test_stdin_is_read_for_one_secret_only(settings):
    result = cli(
        settings,
        "endpoints add stripe --name twice --secret - --secret -",
        input="whsec_x\n",
        ok=False,
    )
    assert result.exit_code == 2 and "stdin" in result.output


def test_a_missing_or_empty_secret_file_is_a_clear_error(settings, tmp_path):
    missing = cli(
        settings, "endpoints add stripe --name x --secret-file", str(tmp_path / "nope"), ok=False
    )
    assert missing.exit_code == 2 and "No such file" in missing.output
    empty = tmp_path / "empty"
    empty.write_text("\n")
    result = run_cli(
        settings, "endpoints", "add", "stripe", "--name", "y", "--secret-file", str(empty), ok=False
    )
    assert result.exit_code == 1 and "cannot be empty" in result.output


def test_a_secret_on_the_command_line_still_works_and_warns_on_stderr_of_the_safer_ways(
    settings,
):
    added = run_cli(
        settings, "endpoints", "add", "stripe", "--name", "cl", "--secret", "whsec_cl", "--json"
    )
    assert json.loads(added.stdout)["name"] == "cl"  # what scripts read is unchanged
    for warned in (
        added,
        run_cli(settings, "endpoints", "secrets", "add", "cl", "--secret", "whsec_2nd"),
    ):
        assert "`ps`" in warned.stderr and "history" in warned.stderr
        assert "--secret-file" in warned.stderr and "--secret -" in warned.stderr
        assert "hidden prompt" in warned.stderr
        assert "whsec_cl" not in warned.stderr and "whsec_2nd" not in warned.stderr
    assert revealed(settings, "cl") == ["whsec_cl", "whsec_2nd"]


def test_a_secret_from_stdin_or_a_file_gives_no_warning(settings, tmp_path):
    path = tmp_path / "secret"
    path.write_text("whsec_file")
    by_file = run_cli(
        settings, "endpoints", "add", "stripe", "--name", "q", "--secret-file", str(path)
    )
    by_stdin = run_cli(
        settings, "endpoints", "secrets", "add", "q", "--secret", "-", input="whsec_stdin\n"
    )
    assert by_file.stderr == by_stdin.stderr == ""


def test_an_empty_secret_given_to_secrets_add_is_refused_not_replaced_by_a_generated_one(
    settings, tmp_path
):
    """GitHub's endpoints get a generated secret when none is given; an empty file or
    stdin is a secret given, and wrong: a rotation script must not go on to remove the
    old secret while the provider signs with one hooklatch does not have."""
    run_cli(settings, "endpoints", "add", "github", "--name", "gh")
    before = revealed(settings, "gh")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for given in (["--secret-file", str(empty)], ["--secret", "-"]):
        result = run_cli(
            settings, "endpoints", "secrets", "add", "gh", *given, input="\n", ok=False
        )
        assert result.exit_code == 1 and "cannot be empty" in result.output
        assert "generated" not in result.output
    assert revealed(settings, "gh") == before
