"""`hooklatch keys rotate` moves every encrypted value to the first key, so the old one can
go: endpoint secrets, secret options and the credentials for the providers' APIs, which
are stored only as ciphertext. Secret fingerprints are keyed, and follow the first key."""

import base64
import hashlib
import hmac
import json
from urllib.parse import urlsplit

import pytest
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from githubkit.webhooks import sign as hub_sign
from sqlalchemy import select, text

from hooklatch.crypto import SecretBox
from hooklatch.errors import SecretUnavailable
from hooklatch.events.models import Event
from hooklatch.providers.remote import Place
from hooklatch.reconcile.runs import RunRequest
from hooklatch.runtime import reconciler
from hooklatch.services.provider_side import NewRegistration, add_registered, set_credential
from hooklatch.testing import json_body
from tests.support.cli import run_cli
from tests.support.fake_github import FakeGitHub
from tests.support.fake_stripe import FakeStripe
from tests.support.providers.meta import APP_SECRET, VERIFY_TOKEN, text_message, whatsapp

# A Stripe restricted key and a GitHub token, each with a tail found nowhere else.
STRIPE_KEY = "rk_test_51AtRestKeyOnlyInItsCiphertextQZXW"
GITHUB_TOKEN = "github_pat_11ATREST0onlyInItsCiphertextYVUT"


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


# Credentials for the providers' APIs.


def stored_credentials(runtime):
    """Each endpoint_credentials row as PostgreSQL holds it, every column as text, and
    its ciphertext."""
    with runtime.engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT endpoint_id, row_to_json(c)::text, ciphertext "
                "FROM endpoint_credentials c ORDER BY endpoint_id"
            )
        )
        return {endpoint: (as_text, bytes(ciphertext)) for endpoint, as_text, ciphertext in rows}


def registered(runtime, provider, name, credential, api_url, scope=None):
    new = NewRegistration(
        provider=provider,
        name=name,
        credential=credential,
        event_types=["invoice.paid"] if provider == "stripe" else ["push"],
        place=Place(api_url=api_url, scope=scope),
    )
    return add_registered(runtime, new, actor="test")["id"]


def test_an_api_credential_is_stored_as_ciphertext_without_its_plaintext(settings, runtime):
    run_cli(settings, "endpoints", "add", "stripe", "--name", "billing")
    run_cli(settings, "endpoints", "add", "github", "--name", "repo")
    set_credential(runtime, "billing", {"api_key": STRIPE_KEY}, actor="test")
    set_credential(runtime, "repo", {"token": GITHUB_TOKEN}, actor="test")

    stored = stored_credentials(runtime)

    assert len(stored) == 2
    box = SecretBox(settings.secret_keys)
    for plaintext in (STRIPE_KEY, GITHUB_TOKEN):
        [(as_text, ciphertext)] = [v for v in stored.values() if plaintext in box.decrypt(v[1])]
        for part in (plaintext, plaintext[-4:]):
            assert part.encode() not in ciphertext
            assert part.encode() not in base64.urlsafe_b64decode(ciphertext)
            assert part not in as_text


def test_keys_rotate_moves_api_credentials_to_the_new_key_and_a_reconcile_runs_on_it_alone(
    settings, runtime, app_with
):
    """Both credentials, and both endpoints' signing secrets, re-encrypted under the new
    first key: with the old key dropped, a Stripe run fetches what Stripe never delivered,
    and a GitHub run's redeliveries are asked for and arrive verified."""
    old_key, new_key = settings.secret_keys[0], Fernet.generate_key().decode()
    new_app = app_with(secret_keys=(new_key,))
    new_runtime = new_app.extensions["hooklatch"]
    new_client = new_app.test_client()

    def send(url, headers, body):
        return new_client.post(urlsplit(url).path, data=body, headers=dict(headers)).status_code

    with FakeStripe() as stripe, FakeGitHub(send=send) as github:
        stripe.add_key(STRIPE_KEY)
        github.add_token(GITHUB_TOKEN)
        billing = registered(runtime, "stripe", "billing", {"api_key": STRIPE_KEY}, stripe.url)
        repo = registered(
            runtime, "github", "repo", {"token": GITHUB_TOKEN}, github.url, "repos/acme/shop"
        )
        [hook] = github.hooks
        lost_events = [stripe.create_event("invoice.paid", {"id": f"in_{n}"}) for n in range(3)]
        lost = [github.deliver(hook, "push", {"ref": f"refs/heads/{n}"}, fail=True) for n in "ab"]
        before = stored_credentials(runtime)
        # The new key alone cannot read what the old one encrypted.
        for endpoint in (billing, repo):
            with pytest.raises(SecretUnavailable):
                reconciler(new_runtime).run(endpoint, RunRequest(trigger="cli", requested_by="t"))

        rotated = run_cli(settings, "keys", "rotate", keys=(new_key, old_key))

        # Each endpoint's signing secret and credential.
        assert "re-encrypted 4 values" in rotated.output
        after = stored_credentials(runtime)
        new_box = SecretBox((new_key,))
        for endpoint in (billing, repo):
            assert after[endpoint][1] != before[endpoint][1]
            assert new_box.decrypt(after[endpoint][1]) == SecretBox((old_key,)).decrypt(
                before[endpoint][1]
            )
            assert STRIPE_KEY not in after[endpoint][0] and GITHUB_TOKEN not in after[endpoint][0]
        pulled = reconciler(new_runtime).run(billing, RunRequest(trigger="cli", requested_by="t"))
        pushed = reconciler(new_runtime).run(repo, RunRequest(trigger="cli", requested_by="t"))

    assert (pulled["status"], pulled["fetched"]) == ("finished", 3)
    assert (pushed["status"], pushed["redeliveries"]) == ("finished", 2)
    with new_runtime.session_factory() as session:
        stored = dict(session.execute(select(Event.external_id, Event.verified_by)).all())
    assert stored == {
        **{str(event["id"]): "api_call" for event in lost_events},
        **{guid: "signature" for guid in lost},
    }
