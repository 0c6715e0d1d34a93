"""A credential given to the CLI in a file: JSON or KEY=VALUE lines, a PEM key over
several lines; a message names a field or a line, never a value."""

import json

import click
import pytest

from hooklatch.cli.credential_input import parse_credential

PEM = "\n".join(
    [
        "-----BEGIN RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA1x/y+z==",
        "AbCd==",
        "-----END RSA PRIVATE KEY-----",
        "",
    ]
)


def test_key_value_lines_skip_blanks_and_comments():
    text = "# the repo's token\n\ntoken = ghp_secretvalue\r\n"
    assert parse_credential(text) == {"token": "ghp_secretvalue"}


def test_a_pem_key_follows_its_key_over_several_lines():
    text = "app_id=12\nprivate_key=" + PEM + "installation_id=34\n"
    assert parse_credential(text) == {"app_id": "12", "private_key": PEM, "installation_id": "34"}


def test_json_numbers_are_read_as_text():
    text = json.dumps({"app_id": 12, "private_key": PEM, "installation_id": 34})
    assert parse_credential(text) == {"app_id": "12", "private_key": PEM, "installation_id": "34"}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "token=ghp_secretvalue\nghp_othersecret\n",
            "line 2 of the credential file",
        ),
        ("token=ghp_secretvalue\ntoken=ghp_secretvalue2\n", "gives 'token' twice"),
        ('{"token": ["ghp_secretvalue"]}', "'token' is not text"),
        ('{"token": "ghp_secretvalue"', "not valid JSON"),
        ("private_key=-----BEGIN KEY-----\nghp_secretvalue\n", "has no -----END line"),
        ("\n# nothing\n", "the credential file is empty"),
    ],
)
def test_a_bad_file_is_named_by_line_or_field_never_by_value(text, said):
    with pytest.raises(click.UsageError) as raised:
        parse_credential(text)
    assert said in str(raised.value)
    assert "secretvalue" not in str(raised.value) and "othersecret" not in str(raised.value)
