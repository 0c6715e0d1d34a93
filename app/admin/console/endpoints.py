"""Endpoints in the console: the URL to give the provider, secrets by fingerprint with
when each last verified a delivery, refusals by reason, the ordering settings, the
endpoint's side at its provider (hooklatch.admin.console.provider_side); disabling and
enabling; changing the ordering; adding a secret (its value shown on that one page,
never again) and removing one. The list flags webhooks that drifted at the provider."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from sqlalchemy import select

from hooklatch.admin.console.auth import actor
from hooklatch.admin.console.blueprint import bp
from hooklatch.endpoints import changes
from hooklatch.endpoints.models import Endpoint
from hooklatch.endpoints.ordering import DEAD_POLICIES, MAX_HOLD_SECONDS, POLICIES
from hooklatch.endpoints.service import endpoint_url, get_endpoint
from hooklatch.errors import BadRequest
from hooklatch.runtime import current_runtime
from hooklatch.services.endpoints import endpoint_details
from hooklatch.services.ordering import change_endpoint_ordering
from hooklatch.services.provider_side import drifted, provider_side


@bp.get("/endpoints")
def endpoints() -> ResponseReturnValue:
    runtime = current_runtime()
    drift = drifted(runtime)
    with runtime.session_factory() as session:
        rows = [
            {
                "endpoint": e,
                "url": endpoint_url(runtime.settings.public_url, e),
                "drift": drift.get(e.id, []),
            }
            for e in session.scalars(select(Endpoint).order_by(Endpoint.name))
        ]
    return render_template("console/endpoints.html", rows=rows)


@bp.get("/endpoints/<endpoint_id>")
def endpoint(endpoint_id: str) -> ResponseReturnValue:
    return _endpoint_page(endpoint_id)


def _endpoint_page(endpoint_id: str, *, new_secret: str | None = None) -> str:
    runtime = current_runtime()
    details = endpoint_details(runtime, endpoint_id)
    provider = runtime.provider(str(details["provider"]))
    return render_template(
        "console/endpoint.html",
        endpoint=details,
        side=provider_side(runtime, endpoint_id),
        credential_fields=provider.credential_fields,
        generates=provider.generates_secret,
        new_secret=new_secret,
        policies=POLICIES,
        dead_policies=DEAD_POLICIES,
        max_hold=MAX_HOLD_SECONDS,
    )


@bp.post("/endpoints/<endpoint_id>/enabled")
def set_enabled(endpoint_id: str) -> ResponseReturnValue:
    runtime = current_runtime()
    enable = request.form.get("enabled") == "true"
    with runtime.session_factory.begin() as session:
        row = get_endpoint(session, endpoint_id)
        changes.set_enabled(session, row, enable, actor=actor(), now=runtime.clock())
    flash("Endpoint enabled." if enable else "Endpoint disabled: its deliveries get 404.", "ok")
    return redirect(url_for("console.endpoint", endpoint_id=endpoint_id))


@bp.post("/endpoints/<endpoint_id>/ordering")
def set_endpoint_ordering(endpoint_id: str) -> ResponseReturnValue:
    """Every field is sent: an empty key path goes back to the provider's key."""
    form = request.form
    try:
        change = change_endpoint_ordering(
            current_runtime(),
            endpoint_id,
            actor=actor(),
            policy=form.get("policy", ""),
            dead=form.get("dead", ""),
            hold_seconds=int(form.get("hold_seconds", "0").strip() or "0"),
            key_path=form.get("key_path", ""),
        )
    except ValueError:
        flash("The hold window is a whole number of seconds.", "error")
    except BadRequest as exc:
        flash(exc.message, "error")
    else:
        flash(
            "Ordering changed: events stored from now on follow it."
            if change.changed
            else "Ordering unchanged.",
            "ok",
        )
    return redirect(url_for("console.endpoint", endpoint_id=endpoint_id))


@bp.post("/endpoints/<endpoint_id>/secrets")
def add_secret(endpoint_id: str) -> ResponseReturnValue:
    """A secret pasted from the provider, or one generated here: shown once, on the page
    this answers with (not after a redirect, which would have to carry it), and never
    again."""
    runtime = current_runtime()
    given = request.form.get("secret", "").strip()
    with runtime.session_factory.begin() as session:
        row = get_endpoint(session, endpoint_id)
        secret, _ = changes.secret_to_add(runtime.provider(row.provider), given)
        added = changes.secret_added(
            session, row, secret, box=runtime.box, actor=actor(), now=runtime.clock()
        )
        fingerprint = added.fingerprint
    flash(f"Secret {fingerprint} added: both verify until you remove the old one.", "ok")
    if given:  # nothing to show: the usual redirect, so that a reload sends nothing again
        return redirect(url_for("console.endpoint", endpoint_id=endpoint_id))
    return _endpoint_page(endpoint_id, new_secret=secret)


@bp.post("/endpoints/<endpoint_id>/secrets/<secret_ref>/remove")
def remove_secret(endpoint_id: str, secret_ref: str) -> ResponseReturnValue:
    runtime = current_runtime()
    with runtime.session_factory.begin() as session:
        row = get_endpoint(session, endpoint_id)
        removed = changes.secret_removed(
            session, row, secret_ref, actor=actor(), now=runtime.clock()
        )
        fingerprint = removed.fingerprint
    flash(f"Secret {fingerprint} removed.", "ok")
    return redirect(url_for("console.endpoint", endpoint_id=endpoint_id))
