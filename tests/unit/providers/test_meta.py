"""Meta's conformance cases and its batched deliveries' dedupe keys, run against the
provider itself."""

import json
from typing import Any

from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from hooklatch.testing import json_body
from tests.support.providers.meta import MetaCase


class TestMetaConformance(MetaCase):
    pass


def test_messenger_entries_yield_one_event_per_messaging_item():
    provider = load_providers()["meta"]
    payload: dict[str, Any] = {
        "object": "page",
        "entry": [
            {
                "id": "PAGE_1",
                "time": 1763726400123,
                "messaging": [
                    {
                        "sender": {"id": "PSID_1"},
                        "timestamp": 1763726400000,
                        "message": {"mid": "m_AAA", "text": "hi"},
                    },
                    {
                        "sender": {"id": "PSID_1"},
                        "timestamp": 1763726400001,
                        "message": {"mid": "m_ECHO", "is_echo": True, "text": "hello"},
                    },
                    {
                        "sender": {"id": "PSID_1"},
                        "timestamp": 1763726400002,
                        "read": {"watermark": 1},
                    },
                ],
            },
            {
                "id": "PAGE_1",
                "time": 1763726401,
                "changes": [{"field": "feed", "value": {"item": "post", "verb": "add"}}],
            },
        ],
    }
    events = provider.parse(Delivery("POST", "https://h.test/hooks/ep", {}, json_body(payload)))
    ids = [e.external_id for e in events]
    assert [e.type for e in events] == [
        "page.messages",
        "page.message_echoes",
        "page.message_reads",
        "page.feed",
    ]
    assert ids[:2] == ["m_AAA", "m_ECHO"]
    assert ids[2].startswith("PAGE_1:1763726400123:message_reads:")
    assert ids[3].startswith("PAGE_1:1763726401:feed:")
    assert events[0].occurred_at is not None
    assert events[0].occurred_at.timestamp() == 1763726400
    # The same item re-sent in another batch gets the same key; another item does not.
    again = provider.parse(
        Delivery("POST", "https://h.test/hooks/ep", {}, json.dumps(payload, indent=2).encode())
    )
    assert [e.external_id for e in again] == ids
    payload["entry"][1]["changes"][0]["value"]["verb"] = "edited"
    changed = provider.parse(Delivery("POST", "https://h.test/hooks/ep", {}, json_body(payload)))
    assert changed[3].external_id != ids[3]
