"""How Meta signs a test request, for the conformance kit and the tests.

Meta signs as GitHub does (``sha256=`` HMAC of the body in X-Hub-Signature-256), so
requests are signed by githubkit; bodies are WhatsApp Business deliveries, unicode
escaped as Meta sends them.
"""

from githubkit.webhooks import sign as hub_sign

from hooklatch.testing import ProviderConformance, json_body

APP_SECRET = "meta-app-secret"
VERIFY_TOKEN = "meta-verify-token"


def whatsapp(*messages, statuses=()):
    value = {"messaging_product": "whatsapp", "metadata": {"phone_number_id": "106540352242922"}}
    if messages:
        value["messages"] = list(messages)
    if statuses:
        value["statuses"] = list(statuses)
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": value}]}],
    }


def text_message(wamid, text="hello"):
    return {
        "from": "15550000001",
        "id": wamid,
        "timestamp": "1763726400",
        "type": "text",
        "text": {"body": text},
    }


class MetaCase(ProviderConformance):
    provider = "meta"
    secret, other_secret = "meta-app-secret-old", "meta-app-secret-new"
    signature_headers = ("X-Hub-Signature-256",)
    options = {"verify_token": VERIFY_TOKEN}

    def sign(self, body, *, secret, now, url):
        return {"X-Hub-Signature-256": hub_sign(secret, body, method="sha256")}

    def event_body(self, event_id, *, note="hello"):
        return json_body(whatsapp(text_message(event_id, note)))  # unicode escaped, as Meta
