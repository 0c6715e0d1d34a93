"""Text a sender chose is shown with its invisible characters escaped, in the console and
the CLI: a right-to-left override, a zero-width space, a direction isolate or a C1
control cannot make an ordering key, an event type or id, or a header value display as
another. The stored values, forms and JSON answers keep the text as it is."""

from __future__ import annotations

import html
import json
import re

from tests.integration.test_ordering_surfaces import fifo_endpoint, park
from tests.support.cli import run_cli
from tests.support.console import signed_in
from tests.support.pipeline import make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"
# A right-to-left override, a zero-width space, a first-strong isolate, a pop directional
# isolate, a left-to-right mark, a zero-width joiner, a byte-order mark.
INVISIBLE = ["\u202e", "\u200b", "\u2068", "\u2069", "\u200e", "\u200d", "\ufeff"]
TYPE = "invoice.\u202ediap"  # reads as "invoice.paid" where it is shown as it is
EXTERNAL_ID = "evt_\u200b1\u2068x\u2069"
KEY = "cus_1\u202e2_suc"


def delivered(client, runtime):
    """An event whose type, id, body and a header hold invisible characters."""
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    sent = json.loads(stripe_event(EXTERNAL_ID, event_type=TYPE, note="\u200eok\u200d\ufeff"))
    body = json.dumps(sent, ensure_ascii=False).encode()  # the characters themselves, in UTF-8
    headers = {**stripe_headers(body, SECRET), "X-Note": "a\x85b\xa0c"}
    answer = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert answer.status_code == 200, answer.json
    return answer.json["events"][0]["id"]


def text_of(page: str, pattern: str) -> str:
    found = re.search(pattern, page, re.S)
    assert found, pattern
    return html.unescape(found[1])


def test_the_console_shows_invisible_characters_as_escapes(app_with, runtime, client):
    event_id = delivered(client, runtime)
    console, _ = signed_in(app_with())
    listed = console.get("/admin/console/events").get_data(as_text=True)
    shown = console.get(f"/admin/console/events/{event_id}").get_data(as_text=True)

    for page in (listed, shown):
        assert not any(c in page for c in INVISIBLE), [c for c in INVISIBLE if c in page]
        assert "invoice.\\u202ediap" in page
        assert "evt_\\u200b1\\u2068x\\u2069" in page
    # The header's bytes 0x85 (a C1 control) and 0xA0 (a no-break space).
    assert text_of(shown, r"<th>x-note</th><td[^>]*><code>(.*?)</code>") == "a\\x85b\\xa0c"
    # The body, shown as JSON, keeps reading as JSON.
    body = json.loads(text_of(shown, r'<pre class="body">(.*?)</pre>'))
    assert body["data"]["object"]["note"] == "\u200eok\u200d\ufeff"
    # Copy as curl sends such a body from the downloaded file: pasted, it would mislead.
    assert "--data-binary @event-" in text_of(shown, r'<pre class="curl" id="curl">(.*?)</pre>')


def test_the_console_shows_a_key_escaped_and_releases_it_as_stored(app_with, runtime):
    endpoint = fifo_endpoint(runtime)
    park(runtime, endpoint, KEY, behind=1)
    park(runtime, endpoint, "cus_1\\u202e2_suc", behind=1)  # the escape, typed as text
    console, _ = signed_in(app_with())
    page = console.get("/admin/console/keys").get_data(as_text=True)

    cells = sorted(html.unescape(c) for c in re.findall(r"<td[^>]*><code>(.*?)</code></td>", page))
    assert cells == ["cus_1\\\\u202e2_suc", "cus_1\\u202e2_suc"]
    # The form sends the key as stored.
    assert f'name="key" value="{KEY}"' in page


def test_the_cli_prints_invisible_characters_as_escapes(settings, runtime, client):
    delivered(client, runtime)
    endpoint = fifo_endpoint(runtime)
    park(runtime, endpoint, KEY, behind=1)
    park(runtime, endpoint, "cus_1\\u202e2_suc", behind=1)

    events = run_cli(settings, "events", "list").stdout
    blocked = run_cli(settings, "ordering", "blocked").stdout.splitlines()

    assert not any(c in events + "".join(blocked) for c in INVISIBLE)
    assert "invoice.\\u202ediap" in events and "evt_\\u200b1\\u2068x\\u2069" in events
    keys = sorted(line.split("  ")[1] for line in blocked)
    assert keys == ["key cus_1\\\\u202e2_suc", "key cus_1\\u202e2_suc"]
    # JSON is unambiguous as it is: the API's and --json's answers keep the text.
    listed = json.loads(run_cli(settings, "events", "list", "--json").stdout)
    assert {row["type"] for row in listed} >= {TYPE}
