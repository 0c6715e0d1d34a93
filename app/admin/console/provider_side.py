"""An endpoint's side at its provider in the console: its API credential set, rotated or
removed (typed into password fields, never shown again), its URL registered with the
provider, read back (drift) or removed there, and reconcile runs asked of the relays.
Each form answers with a redirect to the endpoint's page and a message; the provider's
refusals are that message."""

from __future__ import annotations

import re
from collections.abc import Callable

from flask import flash, redirect, request, url_for
from flask.typing import ResponseReturnValue
from werkzeug.wrappers import Response

from hooklatch.admin.console.auth import actor
from hooklatch.admin.console.blueprint import bp
from hooklatch.display import visible
from hooklatch.errors import BadRequest, NotFound, ProviderAPIFailed
from hooklatch.jsontypes import JSONObject
from hooklatch.providers.remote import Place
from hooklatch.reconcile.runs import RunRequest
from hooklatch.runtime import current_runtime
from hooklatch.services import provider_side

# What a form here can be refused with: shown as the page's message.
REFUSED = (BadRequest, NotFound, ProviderAPIFailed)
# A credential's fields are posted as credential-<name>.
CREDENTIAL_PREFIX = "credential-"
PLACE_FIELDS = ("api_url", "scope", "hook_id")
SEPARATORS = re.compile(r"[\s,]+")


def _back(endpoint_id: str) -> Response:
    return redirect(url_for("console.endpoint", endpoint_id=endpoint_id) + "#provider-side")


def _change(endpoint_id: str, change: Callable[[], JSONObject], done: str) -> Response:
    """Make the change; say ``done``, or why it was refused; back to the endpoint's page."""
    try:
        change()
    except REFUSED as exc:
        flash(exc.message, "error")
    else:
        flash(done, "ok")
    return _back(endpoint_id)


@bp.post("/endpoints/<endpoint_id>/credential")
def set_credential(endpoint_id: str) -> ResponseReturnValue:
    """Every field of the provider's credential, and where its webhook lives if given
    (linking one made by hand)."""
    values = {
        name.removeprefix(CREDENTIAL_PREFIX): value.strip()
        for name, value in request.form.items()
        if name.startswith(CREDENTIAL_PREFIX) and value.strip()
    }
    where = {name: request.form.get(name, "").strip() or None for name in PLACE_FIELDS}
    place = Place(**where) if any(where.values()) else None
    return _change(
        endpoint_id,
        lambda: provider_side.set_credential(
            current_runtime(), endpoint_id, values, actor=actor(), place=place
        ),
        "Credential stored (by its fingerprint below): the one it replaces, if any, is gone.",
    )


@bp.post("/endpoints/<endpoint_id>/credential/remove")
def remove_credential(endpoint_id: str) -> ResponseReturnValue:
    return _change(
        endpoint_id,
        lambda: provider_side.remove_credential(current_runtime(), endpoint_id, actor=actor()),
        "Credential removed: hooklatch no longer calls the provider's API for it.",
    )


@bp.post("/endpoints/<endpoint_id>/register")
def register(endpoint_id: str) -> ResponseReturnValue:
    """Event types separated by commas or spaces; none: those asked for before, else all."""
    event_types = [t for t in SEPARATORS.split(request.form.get("event_types", "")) if t]
    return _change(
        endpoint_id,
        lambda: provider_side.register(
            current_runtime(), endpoint_id, event_types=event_types or None, actor=actor()
        ),
        "Registered: the provider delivers to this endpoint, signed with its secret.",
    )


@bp.post("/endpoints/<endpoint_id>/check")
def check(endpoint_id: str) -> ResponseReturnValue:
    try:
        side = provider_side.check_webhook(current_runtime(), endpoint_id)
    except REFUSED as exc:
        flash(exc.message, "error")
        return _back(endpoint_id)
    webhook = side["webhook"]
    seen = webhook.get("seen") if isinstance(webhook, dict) else None
    error = seen.get("error") if isinstance(seen, dict) else None
    drift = webhook.get("drift") if isinstance(webhook, dict) else None
    if error:
        flash(f"The provider could not be asked: {visible(str(error))}", "error")
    elif drift:
        flash("Read back: the provider's webhook differs from what hooklatch expects.", "error")
    else:
        flash("Read back: the provider holds what hooklatch expects.", "ok")
    return _back(endpoint_id)


@bp.post("/endpoints/<endpoint_id>/unregister")
def unregister(endpoint_id: str) -> ResponseReturnValue:
    return _change(
        endpoint_id,
        lambda: provider_side.unregister(current_runtime(), endpoint_id, actor=actor()),
        "Removed from the provider: it no longer delivers to this endpoint.",
    )


@bp.post("/endpoints/<endpoint_id>/reconcile")
def reconcile(endpoint_id: str) -> ResponseReturnValue:
    """A run (or a dry run) asked of the relays: shown as requested until one takes it."""
    dry_run = request.form.get("dry_run") == "true"
    asked = RunRequest(trigger="console", requested_by=actor(), dry_run=dry_run)
    return _change(
        endpoint_id,
        lambda: provider_side.request_reconcile(current_runtime(), endpoint_id, asked),
        f"{'Dry run' if dry_run else 'Reconcile run'} requested: a relay takes it within seconds.",
    )
