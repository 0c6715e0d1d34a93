"""Provider plugins, discovered through the ``hooklatch.providers`` entry-point group."""

from __future__ import annotations

import inspect
from datetime import timedelta
from importlib.metadata import entry_points

from hooklatch.providers.base import Provider
from hooklatch.renamed import hint

GROUP = "hooklatch.providers"
REQUIRED = ("verify", "parse")


class PluginError(RuntimeError):
    """A provider plugin cannot be loaded; the message names it."""


def load_providers() -> dict[str, Provider]:
    providers: dict[str, Provider] = {}
    origins: dict[str, str] = {}
    for ep in entry_points(group=GROUP):
        origin = f"{ep.name} = {ep.value}"
        if ep.name in providers:
            raise PluginError(
                f"provider name {ep.name!r} is registered twice: {origins[ep.name]!r} "
                f"and {origin!r}"
            )
        try:
            factory = ep.load()
        except Exception as exc:
            raise PluginError(
                f"provider plugin {origin!r} failed to import: {exc}{hint(exc)}"
            ) from exc
        provider = validate(factory, origin=origin)
        if provider.name != ep.name:
            raise PluginError(
                f"provider plugin {origin!r} names itself {provider.name!r}: "
                f"its name attribute must equal the entry-point name {ep.name!r}"
            )
        providers[ep.name] = provider
        origins[ep.name] = origin
    return providers


# How hooklatch calls each method: a plugin whose method cannot take these is refused at
# start rather than failing on its first delivery.
CALLS: dict[str, tuple[tuple[object, ...], dict[str, object]]] = {
    "verify": ((None,), {"secrets": (), "now": None}),
    "parse": ((None,), {}),
    "handshake": ((None,), {"secrets": ()}),
    "challenge": ((None,), {"secrets": ()}),
}


def validate(factory: object, *, origin: str) -> Provider:
    try:
        instance = factory() if isinstance(factory, type) else factory
    except Exception as exc:
        raise PluginError(f"provider plugin {origin!r} failed to start: {exc}") from exc
    for method in REQUIRED:
        attr = getattr(type(instance), method, None)
        if not callable(attr) or attr is getattr(Provider, method):
            raise PluginError(f"provider plugin {origin!r} does not implement {method}()")
    for method, (args, kwargs) in CALLS.items():
        try:
            inspect.signature(getattr(instance, method)).bind(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            raise PluginError(
                f"provider plugin {origin!r}: {method}() does not take the arguments "
                f"hooklatch passes ({exc}); see docs/plugins.md"
            ) from exc
    if not isinstance(getattr(instance, "retry_window", None), timedelta):
        raise PluginError(f"provider plugin {origin!r}: retry_window must be a timedelta")
    return instance  # type: ignore[return-value]
