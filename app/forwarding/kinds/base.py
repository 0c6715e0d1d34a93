"""What a kind of destination implements: checking its settings, and a publisher that
sends messages and says, for each, whether the destination acknowledged it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, NamedTuple, Protocol

from hooklatch.forwarding.message import Message


class Outcome(NamedTuple):
    """A message's fate: acknowledged by the destination (``delivered``), or not, with
    the reason (``error``: never a secret). ``duplicate``: the destination said it held
    the message already (JetStream's dedupe window)."""

    delivered: bool
    error: str | None = None
    duplicate: bool = False


class Publisher(Protocol):
    """A connection to one destination, used by one thread. ``at_once``: how many
    messages one call sends together, so that a call of that many is over within about
    one timeout (the sender renews its lease between two such calls)."""

    at_once: int

    def publish(self, messages: Sequence[Message]) -> list[Outcome]:
        """Send every message (concurrently where the kind can), and return one outcome
        per message in their order. Never raises for a destination that is down or
        refuses: each message's outcome says so, and the next call connects again."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Connection:
    """A destination's settings as checked: ``settings`` are shown as they are;
    ``secrets`` are stored encrypted and never shown (a URL with its password);
    ``shown`` is what every face shows of the secrets (a URL without its password)."""

    settings: dict[str, str]
    secrets: dict[str, str]
    shown: str


class Kind(Protocol):
    name: ClassVar[str]
    # The settings it takes, each with whether it is a secret and what it is for.
    fields: ClassVar[Mapping[str, Field]]

    def check(self, given: Mapping[str, str]) -> Connection:
        """The settings given, checked and split; ValueError says what is wrong (never
        quoting a secret)."""
        ...

    def open(self, connection: Connection, *, timeout: float) -> Publisher: ...


@dataclass(frozen=True)
class Field:
    help: str
    required: bool = False
    secret: bool = False
    default: str | None = None
