"""A handler that does nothing: what is left is hooklatch's own cost per event."""

from hooklatch import Context, EventView, on


@on("stripe", "*")
def noop(event: EventView, ctx: Context) -> None:
    pass
