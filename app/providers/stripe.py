"""Stripe: ``Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]``, HMAC-SHA256 over ``t.body``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hooklatch.providers.base import Delivery, IncomingEvent
from hooklatch.providers.keys import KeyedEvent, dotted, key_text
from hooklatch.providers.parsing import id_and_type, json_object, unix_time
from hooklatch.providers.remote import Place
from hooklatch.providers.schemes import SchemeProvider, TimestampedHeader

if TYPE_CHECKING:
    from hooklatch.providers.stripe_api import StripeAPI


class StripeProvider(SchemeProvider):
    name = "stripe"
    retry_window = timedelta(days=3)
    # The key is the whole secret as UTF-8, "whsec_" prefix included.
    scheme = TimestampedHeader(
        "Stripe-Signature",
        separator=",",
        timestamp_key="t",
        signature_key="v1",
        joiner=b".",
        logs_shape=True,
    )
    credential_fields = {
        "api_key": "a restricted key (rk_...) that can read Events and write Webhook Endpoints"
    }

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        event_id, event_type = id_and_type(payload, what="a Stripe event")
        occurred_at = unix_time(payload.get("created"))
        return [
            IncomingEvent(
                external_id=event_id, type=event_type, occurred_at=occurred_at, id_signed=True
            )
        ]

    def ordering_key(self, event: KeyedEvent) -> str | None:
        """The customer the object belongs to (``cus_...``), else its subscription, else
        the object's own id: a customer's own events are keyed by its id, and a
        subscription's, invoices' and payments' by their customer's. The first of these
        the object has decides; one that is not an id gives no key. The position is the
        default, the event's ``created`` (whole seconds)."""
        subject = dotted(event.payload, "data.object")
        for field in ("customer", "subscription", "id"):
            value = dotted(subject, field)
            if value is not None:
                return key_text(value)
        return None

    def remote(self, credentials: Mapping[str, str], place: Place) -> StripeAPI:
        """Stripe's API with the endpoint's key: its webhook endpoint and its events."""
        # Imported here: stripe-python takes some 30 MB, which only the processes that
        # call Stripe's API (the relay's reconcile, the CLI) need, never ingest's workers.
        from hooklatch.providers.stripe_api import StripeAPI

        return StripeAPI(credentials["api_key"], place)

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        stamp = int(now.timestamp())
        payload = {
            "id": f"evt_demo_{stamp}",
            "object": "event",
            "type": "invoice.paid",
            "created": stamp,
            "livemode": False,
            "data": {
                "object": {"id": f"in_demo_{stamp}", "object": "invoice", "amount_paid": 2000}
            },
        }
        return {"Content-Type": "application/json"}, json.dumps(payload).encode()
