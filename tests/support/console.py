"""Using the console through Flask's test client: signing in, and the CSRF token of a
page's forms."""

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
