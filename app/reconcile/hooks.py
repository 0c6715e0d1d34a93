"""The webhook at the provider: registering the endpoint's URL through its API, reading
back what the provider holds (drift), and removing it. Functions take the session first
and never commit; each makes one or two API calls."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.orm import Session

from hooklatch.crypto import SecretBox
from hooklatch.endpoints.models import Endpoint
from hooklatch.endpoints.service import add_secret, generate_secret
from hooklatch.errors import BadRequest, ProviderAPIFailed
from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.providers.remote import NOT_FOUND, Place, Registration, RemoteError
from hooklatch.reconcile.credentials import Reach
from hooklatch.reconcile.models import ProviderHook

# ProviderHook.drift
DISABLED = "disabled"
URL_CHANGED = "url_changed"
EVENT_TYPES_CHANGED = "event_types_changed"
DELETED = "deleted"


def failed(exc: RemoteError, doing: str) -> ProviderAPIFailed:
    """A face's error for an API call that failed: the API's reason and words."""
    status = f" (HTTP {exc.status})" if exc.status else ""
    return ProviderAPIFailed(
        f"the provider's API refused {doing}{status}: {exc}", reason=f"provider_{exc.reason}"
    )


# The longest of each part of a place that provider_hooks holds.
PLACE_LENGTHS = {"api_url": 500, "scope": 255, "hook_id": 255}
# The longest URL read back from the provider that is kept (ProviderHook.seen_url): a
# longer one is not the endpoint's, and shows as drift cut to this length.
SEEN_URL_LENGTH = 2000


def place_hook(
    session: Session, endpoint: Endpoint, place: Place, *, event_types: Sequence[str] | None = None
) -> ProviderHook:
    """Say where the endpoint's webhook lives (its API URL, scope and, once known, id)."""
    for name, longest in PLACE_LENGTHS.items():
        value = getattr(place, name)
        if value is not None and len(value) > longest:
            raise BadRequest(f"{name} is longer than {longest} characters", reason="bad_place")
    hook = session.get(ProviderHook, endpoint.id)
    if hook is None:
        hook = ProviderHook(endpoint_id=endpoint.id)
        session.add(hook)
    hook.api_url, hook.scope = place.api_url, place.scope
    if place.hook_id is not None:
        hook.hook_id = place.hook_id
    if event_types is not None:
        hook.event_types = list(event_types)
    session.flush()
    return hook


def register(
    session: Session,
    endpoint: Endpoint,
    reach: Reach,
    *,
    url: str,
    event_types: Sequence[str],
    box: SecretBox,
    now: datetime,
) -> Registration:
    """Create the webhook at the provider and keep its signing secret: the one hooklatch
    made (GitHub) or the one the provider returned (Stripe), stored at once, never shown."""
    hook = session.get(ProviderHook, endpoint.id)
    if hook is not None and hook.hook_id is not None:
        raise BadRequest(
            f"endpoint {endpoint.id} is registered already (hook {hook.hook_id})",
            reason="registered_already",
        )
    # Where hooklatch makes the secret (GitHub), the endpoint's own is given to the
    # provider, else a new one; where the provider makes it (Stripe), it comes back.
    secret, new = None, False
    if reach.provider.generates_secret:
        if endpoint.secrets:
            secret = box.decrypt(endpoint.secrets[0].ciphertext)
        else:
            secret, new = generate_secret(), True
    try:
        made = reach.api.register(url=url, event_types=event_types, secret=secret)
    except RemoteError as exc:
        raise failed(exc, "the registration") from None
    except ValueError as exc:  # what the plugin cannot ask of its provider
        raise BadRequest(str(exc), reason="bad_place") from None
    if made.secret is not None:
        add_secret(session, endpoint, made.secret, box=box)
    elif new and secret is not None:
        add_secret(session, endpoint, secret, box=box)
    # What the provider says it holds is what later looks compare with: asked for no type,
    # Stripe holds "*".
    hook = place_hook(session, endpoint, reach.place, event_types=list(made.event_types))
    hook.hook_id = made.hook_id
    hook.registered_at = now
    _seen(hook, made, url=url, now=now)
    session.flush()
    return Registration(made.hook_id, made.url, made.event_types, made.enabled)


def check(
    session: Session, endpoint: Endpoint, reach: Reach, *, url: str, now: datetime
) -> ProviderHook:
    """Read what the provider holds for the endpoint's webhook and note how it drifted
    from what hooklatch expects. A failed look is noted, not raised."""
    hook = place_hook(session, endpoint, reach.place)
    if hook.hook_id is None:
        return hook
    try:
        seen = reach.api.describe()
    except ValueError as exc:
        raise BadRequest(str(exc), reason="bad_place") from None
    except RemoteError as exc:
        if exc.reason == NOT_FOUND:
            hook.seen_url = hook.seen_event_types = hook.seen_enabled = None
            hook.drift, hook.check_error, hook.checked_at = DELETED, None, now
        else:
            hook.check_error = f"{exc.reason}: {exc}"
            hook.checked_at = now
        session.flush()
        return hook
    _seen(hook, seen, url=url, now=now)
    session.flush()
    return hook


def _seen(hook: ProviderHook, seen: Registration, *, url: str, now: datetime) -> None:
    hook.seen_url = seen.url[:SEEN_URL_LENGTH]
    hook.seen_event_types = list(seen.event_types)
    hook.seen_enabled = seen.enabled
    drift = []
    if not seen.enabled:
        drift.append(DISABLED)
    if seen.url != url:
        drift.append(URL_CHANGED)
    if hook.event_types is not None and set(seen.event_types) != set(hook.event_types):
        drift.append(EVENT_TYPES_CHANGED)
    hook.drift = ",".join(drift) or None
    hook.check_error = None
    hook.checked_at = now


def unregister(session: Session, endpoint: Endpoint, reach: Reach) -> bool:
    """Delete the webhook at the provider; False when it was gone already. Either way the
    endpoint has no webhook at its provider after, and may be registered again."""
    hook = session.get(ProviderHook, endpoint.id)
    if hook is None or hook.hook_id is None:
        raise BadRequest(
            f"endpoint {endpoint.id} has no webhook at its provider", reason="not_registered"
        )
    existed = True
    try:
        reach.api.unregister()
    except RemoteError as exc:
        if exc.reason != NOT_FOUND:
            raise failed(exc, "the removal") from None
        existed = False
    except ValueError as exc:
        raise BadRequest(str(exc), reason="bad_place") from None
    hook.hook_id = None
    hook.drift = None
    session.flush()
    return existed


def described(hook: ProviderHook | None) -> JSONObject | None:
    """The webhook at the provider as every face shows it."""
    if hook is None:
        return None
    return {
        "api_url": hook.api_url,
        "scope": hook.scope,
        "hook_id": hook.hook_id,
        "event_types": _texts(hook.event_types),
        "registered_at": hook.registered_at.isoformat() if hook.registered_at else None,
        "seen": {
            "url": hook.seen_url,
            "event_types": _texts(hook.seen_event_types),
            "enabled": hook.seen_enabled,
            "checked_at": hook.checked_at.isoformat() if hook.checked_at else None,
            "error": hook.check_error,
        },
        "drift": _texts(hook.drift.split(",") if hook.drift else []),
    }


def _texts(values: list[str] | None) -> list[JSON] | None:
    return None if values is None else list(values)
