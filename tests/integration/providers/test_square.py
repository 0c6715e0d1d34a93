"""Square through the real endpoint: stored ids and type, duplicates, the signed URL."""

from datetime import UTC, datetime

from tests.support.database import count
from tests.support.pipeline import make_endpoint
from tests.support.providers.square import VECTORS, square_signature


def test_square_event_is_stored_under_its_event_id_and_type(client, runtime):
    endpoint, _ = make_endpoint(runtime, "square", secrets=["sq-key"])
    body = VECTORS[0].values[2]
    url = f"{runtime.settings.public_url}/hooks/{endpoint}"
    headers = {
        "x-square-hmacsha256-signature": square_signature("sq-key", url, body),
        "Content-Type": "application/json",
    }
    first = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    again = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert (first.json["status"], again.json["status"]) == ("accepted", "duplicate")
    with runtime.engine.connect() as connection:
        row = connection.exec_driver_sql("SELECT external_id, type, occurred_at FROM events").one()
    assert row.external_id == "ac3ac95b-f97d-458c-a6e6-18981597e05f"
    assert row.type == "webhooks.test_notification"
    assert row.occurred_at == datetime(2022, 7, 13, 20, 30, 59, 37339, tzinfo=UTC)
    assert count(runtime, "SELECT count(*) FROM events") == 1


def test_square_signature_for_another_notification_url_is_refused(client, runtime):
    """Square signs the subscription's URL: the public one, not the app's own address."""
    endpoint, _ = make_endpoint(runtime, "square", secrets=["sq-key"])
    body = VECTORS[0].values[2]
    headers = {
        "x-square-hmacsha256-signature": square_signature(
            "sq-key", f"http://localhost/hooks/{endpoint}", body
        ),
        "Content-Type": "application/json",
    }
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert (response.status_code, response.json["error"]) == (401, "bad_signature")
