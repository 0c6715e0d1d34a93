"""A scenario's plan: how long and how big each of its runs is. A field's default is what a
full run measures with; a field made with `sized` also says what a smoke run (checks, not
figures) uses instead, on the same line."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Self, TypeVar

T = TypeVar("T")

SMOKE = "smoke"


def sized(full: T, *, smoke: T) -> T:
    """A plan's field: ``full`` in a full run, ``smoke`` in a smoke run."""
    return field(default=full, metadata={SMOKE: smoke})


@dataclass(frozen=True)
class Sized:
    """What every scenario's plan derives from: `for_run` makes the full plan or the smoke one."""

    @classmethod
    def for_run(cls, smoke: bool) -> Self:
        if not smoke:
            return cls()
        return cls(**{f.name: f.metadata[SMOKE] for f in fields(cls) if SMOKE in f.metadata})
