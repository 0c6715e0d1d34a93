"""The embedded default's demo handler: logs every event it is given."""

from __future__ import annotations

from hooklatch import Context, EventView, on


@on("*", "*")
def log_event(event: EventView, ctx: Context) -> None:
    ctx.log.info(
        "demo handler ran for %s %s %s (idempotency key %s)",
        event.provider,
        event.type,
        event.external_id,
        ctx.idempotency_key,
    )
