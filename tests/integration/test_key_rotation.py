"""`hooklatch keys rotate` moves every encrypted value to the first key, so the old one can
go; secret fingerprints are keyed, and follow the first key."""

import base64
import hashlib
import hmac
import json

import pytest
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from githubkit.webhooks import sign as hub_sign
from sqlalchemy import text

from hooklatch.testing import json_body
from tests.support.cli import run_cli
from tests.support.providers.meta import APP_SECRET, VERIFY_TOKEN, text_message, whatsapp


@pytest.fixture
def client_with_keys(app_with):
    """A test client of an app that has only the given HOOKLATCH_SECRET_KEYS."""
    return lambda *keys: app_with(secret_keys=keys).test_client()


def add_meta_endpoint(settings):
    created = run_cli(
        settings,
        "endpoints",
        "add",
        "meta",
        "--name",
        "pages",
        "--secret",
        APP_SECRET,
        "--option",
        f"verify_token={VERIFY_TOKEN}",
        "--json",
    )
    return json.loads(created.stdout)  # the warning of --secret VALUE is on stderr


def expected_fingerprint(key, secret):
    """HMAC-SHA256 of the secret under a key derived (HKDF) from the first Fernet key."""
    derived = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"hooklatch secret fingerprint"
    ).derive(base64.urlsafe_b64decode(key))
    return hmac.new(derived, secret.encode(), hashlib.sha256).hexdigest()[:12]


def stored_fingerprints(runtime):
    with runtime.engine.connect() as connection:
        rows = connection.execute(text("SELECT fingerprint FROM endpoint_secrets ORDER BY id"))
        return [row[0] for row in rows]


def test_after_keys_rotate_a_meta_endpoint_works_with_the_new_key_alone(settings, client_with_keys):
    old_key, new_key = settings.secret_keys[0], Fernet.generate_key().decode()
    endpoint = add_meta_endpoint(settings)["id"]

    rotated = run_cli(settings, "keys", "rotate", keys=(new_key, old_key))

    client = client_with_keys(new_key)
    body = json_body(whatsapp(text_message("wamid.ROTATED")))
    headers = {
        "X-Hub-Signature-256": hub_sign(APP_SECRET, body, method="sha256"),
        "Content-Type": "application/json",
    }
    posted = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert posted.status_code == 200, posted.json
    query = {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "42"}
    answered = client.get(f"/hooks/{endpoint}", query_string=query)
    assert (answered.status_code, answered.data) == (200, b"42")
    assert "re-encrypted 2 values" in rotated.output  # the app secret and the verify token


def test_keys_rotate_with_a_value_no_key_decrypts_changes_nothing(settings, runtime):
    add_meta_endpoint(settings)
    stranger = Fernet.generate_key().decode()
    with runtime.engine.connect() as connection:
        before = connection.execute(text("SELECT options FROM endpoints")).scalar_one()

    failed = run_cli(settings, "keys", "rotate", keys=(stranger,), ok=False)
    assert failed.exit_code == 1
    assert "cannot be decrypted" in failed.output and "Traceback" not in failed.output
    with runtime.engine.connect() as connection:
        assert connection.execute(text("SELECT options FROM endpoints")).scalar_one() == before


def test_a_stored_fingerprint_is_a_keyed_hmac_not_a_bare_sha256(settings, runtime):
    run_cli(settings, "endpoints", "add", "stripe", "--name", "fp", "--secret", "whsec_low")
    [stored] = stored_fingerprints(runtime)
    assert stored != hashlib.sha256(b"whsec_low").hexdigest()[:12]
    assert stored == expected_fingerprint(settings.secret_keys[0], "whsec_low")
    shown = json.loads(run_cli(settings, "endpoints", "show", "fp").output)
    assert [s["fingerprint"] for s in shown["secrets"]] == [stored]


def test_keys_rotate_recomputes_fingerprints_under_the_new_first_key(settings, runtime):
    run_cli(settings, "endpoints", "add", "stripe", "--name", "fp", "--secret", "whsec_low")
    old_key, new_key = settings.secret_keys[0], Fernet.generate_key().decode()
    run_cli(settings, "keys", "rotate", keys=(new_key, old_key))
    assert stored_fingerprints(runtime) == [expected_fingerprint(new_key, "whsec_low")]
    # The secret can be removed by the fingerprint the CLI now shows.
    run_cli(settings, "endpoints", "secrets", "add", "fp", "--secret", "whsec_b", keys=(new_key,))
    removed = run_cli(
        settings,
        "endpoints",
        "secrets",
        "remove",
        "fp",
        expected_fingerprint(new_key, "whsec_low"),
        keys=(new_key,),
    )
    assert "removed" in removed.output


def test_db_upgrade_replaces_fingerprints_stored_as_a_bare_sha256(settings, runtime):
    run_cli(settings, "endpoints", "add", "stripe", "--name", "fp", "--secret", "whsec_low")
    bare = hashlib.sha256(b"whsec_low").hexdigest()[:12]
    with runtime.engine.begin() as connection:
        connection.execute(text("UPDATE endpoint_secrets SET fingerprint = :f"), {"f": bare})

    run_cli(settings, "db", "upgrade")
    assert stored_fingerprints(runtime) == [
        expected_fingerprint(settings.secret_keys[0], "whsec_low")
    ]
