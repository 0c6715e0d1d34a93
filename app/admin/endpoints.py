"""The admin API's endpoints: list, show, add (registered with the provider in the same
call, if asked), enable, disable, remove, and their secrets added and removed (a
rotation), through the service functions the CLI and the console call, with the same
audit entries. A secret's value is answered once, where it was generated (adding an
endpoint or a secret without one); never again, and never logged. A secret that came from
a registration, and an API credential, are never answered."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from flask import request
from flask.typing import ResponseReturnValue
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from hooklatch.admin.blueprint import bp, store_errors_as_503
from hooklatch.admin.inputs import (
    api_actor,
    credential,
    json_object,
    known_fields,
    text_field,
    text_list,
    whole_number,
)
from hooklatch.endpoints import changes
from hooklatch.endpoints.serialize import describe_endpoint, describe_secret, page
from hooklatch.endpoints.service import create_endpoint, get_endpoint
from hooklatch.errors import BadRequest, Conflict, ProviderAPIFailed, StoreUnavailable, storable
from hooklatch.events.serialize import MAX_LIST_LIMIT
from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.providers.base import Provider
from hooklatch.providers.remote import Place
from hooklatch.runtime import current_runtime
from hooklatch.services import provider_side
from hooklatch.services.endpoints import endpoint_details

PAGE_SIZE = 100
ADD_FIELDS = frozenset({"provider", "name", "secrets", "options", "register", "requested_by"})
REGISTER_FIELDS = frozenset({"event_types", "credential", "api_url", "scope"})
SECRET_FIELDS = frozenset({"secret", "requested_by"})
# DELETE /admin/endpoints/<endpoint>?remote=
REMOTE_CHOICES = ("true", "false")


@bp.get("/endpoints")
def endpoints() -> ResponseReturnValue:
    """Oldest first, ``limit`` at a time: ``next`` is the ``after`` of the next page."""
    runtime = current_runtime()
    limit = whole_number("limit", request.args.get("limit", str(PAGE_SIZE)), high=MAX_LIST_LIMIT)
    after = request.args.get("after")
    with runtime.session_factory() as session:
        rows, after = page(session, after=after, limit=limit)
        public_url = runtime.settings.public_url
        return {
            "endpoints": [describe_endpoint(e, public_url=public_url) for e in rows],
            "next": after,
        }


@bp.post("/endpoints")
def add_endpoint() -> ResponseReturnValue:
    """``{provider, name, secrets?, options?}``: 201 with the URL to give the provider.
    Given no secret, one is generated where the receiver chooses it (GitHub), answered in
    ``secret_values`` this once; where the provider chooses it (Stripe), the endpoint
    refuses deliveries (no_secret) until the one it shows is added."""
    runtime = current_runtime()
    data = known_fields(json_object(), ADD_FIELDS)
    provider = _provider(data)
    if data.get("register") is not None:
        return _add_registered(data, provider)
    given = _secrets(data)
    try:
        with _writing() as session:
            row, plain = create_endpoint(
                session,
                provider=provider,
                name=_required(data, "name"),
                secrets=given,
                box=runtime.box,
                options=_options(data),
            )
            changes.created(session, row, actor=api_actor(data), now=runtime.clock())
            body = describe_endpoint(row, public_url=runtime.settings.public_url)
    except IntegrityError as exc:  # the same name, added at the same moment elsewhere
        raise Conflict("an endpoint of that name exists already", reason="name_taken") from exc
    if plain and not given:
        body["secret_values"] = [*plain]
    return body, 201, _location(body)


def _add_registered(data: JSONObject, provider: Provider) -> ResponseReturnValue:
    """``register: {credential, event_types?, api_url?, scope?}``: the endpoint is created
    with its credential and its URL registered with the provider, whose signing secret is
    stored and never answered. If the provider refuses, the endpoint stays, with its
    credential and no secret, and the 502 says how to try again."""
    runtime = current_runtime()
    asked = data["register"]
    if not isinstance(asked, dict):
        raise BadRequest("register must be an object", reason="bad_parameter")
    known_fields(asked, REGISTER_FIELDS)
    if data.get("secrets"):
        raise BadRequest(
            "a registered endpoint's secret comes from its registration: give none",
            reason="bad_secret",
        )
    new = provider_side.NewRegistration(
        provider=provider.name,
        name=_required(data, "name"),
        credential=credential(asked),
        event_types=text_list(asked, "event_types") or [],
        place=Place(api_url=text_field(asked, "api_url"), scope=text_field(asked, "scope")),
        options=_options(data),
    )
    with store_errors_as_503():
        try:
            body = provider_side.add_registered(runtime, new, actor=api_actor(data))
        except IntegrityError as exc:  # the same name, added at the same moment elsewhere
            raise Conflict("an endpoint of that name exists already", reason="name_taken") from exc
        except ProviderAPIFailed as exc:
            raise ProviderAPIFailed(
                f"{exc.message} (endpoint {new.name!r} was added, with its credential and no "
                f"secret: POST /admin/endpoints/{new.name}/register tries again)",
                reason=exc.reason,
            ) from exc
    return body, 201, _location(body)


def _location(body: JSONObject) -> dict[str, str]:
    return {"Location": f"{bp.url_prefix}/endpoints/{body['id']}"}


@bp.get("/endpoints/<endpoint>")
def endpoint(endpoint: str) -> ResponseReturnValue:
    """By id or name: secrets by fingerprint, refusals by reason, repeats and conflicts,
    and its provider's side (credential, webhook, reconcile)."""
    runtime = current_runtime()
    with store_errors_as_503():
        details = endpoint_details(runtime, endpoint)
        return {**details, "provider_side": provider_side.provider_side(runtime, endpoint)}


@bp.delete("/endpoints/<endpoint>")
def remove_endpoint(endpoint: str) -> ResponseReturnValue:
    """The endpoint and its events; ``?remote=true`` removes its webhook at the provider
    first, ``false`` leaves it. One registered at its provider must say which: 409
    ``remote_choice_needed`` otherwise (the provider would go on delivering to a URL that
    is gone)."""
    runtime = current_runtime()
    data = known_fields(json_object(), frozenset({"requested_by"}))
    given = request.args.get("remote")
    if given is not None and given not in REMOTE_CHOICES:
        raise BadRequest("remote must be true or false", reason="bad_parameter")
    with store_errors_as_503():
        if given is None and provider_side.is_registered(runtime, endpoint):
            raise Conflict(
                f"endpoint {endpoint!r} is registered at its provider: say whether to remove "
                "its webhook there too with ?remote=true, or to leave it with ?remote=false",
                reason="remote_choice_needed",
            )
        return provider_side.remove_endpoint(
            runtime, endpoint, remote=given == "true", actor=api_actor(data)
        )


@bp.post("/endpoints/<endpoint>/enable")
def enable(endpoint: str) -> ResponseReturnValue:
    return _set_enabled(endpoint, True)


@bp.post("/endpoints/<endpoint>/disable")
def disable(endpoint: str) -> ResponseReturnValue:
    """Its deliveries are answered 404 from now on."""
    return _set_enabled(endpoint, False)


def _set_enabled(ref: str, enabled: bool) -> JSONObject:
    runtime = current_runtime()
    data = known_fields(json_object(), frozenset({"requested_by"}))
    with _writing() as session:
        row = get_endpoint(session, ref)
        changes.set_enabled(session, row, enabled, actor=api_actor(data), now=runtime.clock())
        return describe_endpoint(row, public_url=runtime.settings.public_url)


@bp.post("/endpoints/<endpoint>/secrets")
def add_secret(endpoint: str) -> ResponseReturnValue:
    """``{secret?}``: both secrets verify until the old one is removed. Given none, one is
    generated where the receiver chooses it, answered in ``secret_value`` this once."""
    runtime = current_runtime()
    data = known_fields(json_object(), SECRET_FIELDS)
    given = _secret(data.get("secret"), "secret")
    with _writing() as session:
        row = get_endpoint(session, endpoint)
        secret, generated = changes.secret_to_add(runtime.provider(row.provider), given)
        added = changes.secret_added(
            session, row, secret, box=runtime.box, actor=api_actor(data), now=runtime.clock()
        )
        body = {"endpoint_id": row.id, **describe_secret(added)}
    if generated:
        body["secret_value"] = secret
    return body, 201


@bp.delete("/endpoints/<endpoint>/secrets/<secret_ref>")
def remove_secret(endpoint: str, secret_ref: str) -> ResponseReturnValue:
    """By id or fingerprint; 409 ``last_secret`` for the only one."""
    runtime = current_runtime()
    data = known_fields(json_object(), frozenset({"requested_by"}))
    with _writing() as session:
        row = get_endpoint(session, endpoint)
        removed = changes.secret_removed(
            session, row, secret_ref, actor=api_actor(data), now=runtime.clock()
        )
        return {"endpoint_id": row.id, **describe_secret(removed)}


@contextmanager
def _writing() -> Iterator[Session]:
    """A transaction; 503 ``store_unavailable`` if the database does not answer."""
    try:
        with current_runtime().session_factory.begin() as session:
            yield session
    except IntegrityError:  # a row that cannot be: the caller says which
        raise
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc


def _required(data: JSONObject, name: str) -> str:
    value = text_field(data, name)
    if not value:
        raise BadRequest(f"{name} is required", reason="bad_parameter")
    return value


def _provider(data: JSONObject) -> Provider:
    """The provider named; 400 ``unknown_provider`` if it is not installed."""
    providers = current_runtime().providers
    name = _required(data, "provider")
    if name not in providers:
        installed = ", ".join(sorted(providers))
        raise BadRequest(
            f"that provider is not installed (installed: {installed})", reason="unknown_provider"
        )
    return providers[name]


def _secret(value: JSON, name: str) -> str | None:
    """A secret given in the body: text; the message never repeats it."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or not storable(value):
        raise BadRequest(f"{name} must be non-empty text (no NUL character)", reason="bad_secret")
    return value


def _secrets(data: JSONObject) -> list[str]:
    values = data.get("secrets", [])
    if not isinstance(values, list):
        raise BadRequest("secrets must be a list of text", reason="bad_secret")
    return [s for s in (_secret(v, "each secret") for v in values) if s is not None]


def _options(data: JSONObject) -> dict[str, str]:
    options = data.get("options") or {}
    texts = {
        k: v
        for k, v in (options.items() if isinstance(options, dict) else ())
        if isinstance(v, str) and storable(k) and storable(v)
    }
    if not isinstance(options, dict) or len(texts) != len(options):
        raise BadRequest("options must be an object of text values", reason="bad_option")
    return texts
