"""Using the console through Flask's test client: signing in, the CSRF token of a page's
forms, and an endpoint's page with its "At the provider" section."""

from __future__ import annotations

import re
from typing import Any

from tests.support.tokens import ADMIN_TOKEN as TOKEN


def csrf_of(response: Any) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', response.get_data(as_text=True))
    assert found, "no CSRF token in the page"
    return found[1]


def signed_in(app: Any) -> tuple[Any, Any]:
    """A test client signed in with the admin token (as Grace), and the sign-in's answer."""
    client = app.test_client()
    form = client.get("/admin/console/login")
    answer = client.post(
        "/admin/console/login",
        data={"name": "Grace", "token": TOKEN, "csrf_token": csrf_of(form)},
    )
    assert answer.status_code == 302, answer.get_data(as_text=True)
    return client, answer


def page_of(client: Any, endpoint: str) -> str:
    """The endpoint's page in the console, as a signed-in client gets it."""
    answer = client.get(f"/admin/console/endpoints/{endpoint}")
    assert answer.status_code == 200
    return str(answer.get_data(as_text=True))


def section(page: str) -> str:
    """An endpoint page's "At the provider" section."""
    start = page.index('id="provider-side"')
    return page[start : page.index("</section>", start)]
