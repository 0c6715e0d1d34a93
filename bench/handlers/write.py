"""A handler that writes one row through ctx.session, stamped with its start time."""

import time

from bench.handlers import effects
from hooklatch import Context, EventView, on


@on("stripe", "*")
def write_one(event: EventView, ctx: Context) -> None:
    ctx.session.execute(effects.insert().values(event_id=event.id, started_at=time.time()))
