"""The RabbitMQ kind: each message published persistent to an exchange with a routing key,
on a channel in confirm mode, and ``mandatory``: a message delivered is one the broker
confirmed after routing it to a queue; one no queue takes comes back, and fails.

pika's BlockingConnection waits for each confirmation in turn, so a call's messages go
one after another."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import ClassVar

import pika
from pika.adapters.blocking_connection import (
    BlockingChannel,
    BlockingConnection,
)
from pika.exceptions import (
    AMQPError,
    ChannelClosed,
    ConnectionClosed,
    NackError,
    UnroutableError,
)

from hooklatch.forwarding.kinds.base import Connection, Field, Outcome
from hooklatch.forwarding.kinds.checks import checked_url, settings_of, shown_url, split
from hooklatch.forwarding.kinds.failures import failed, os_reason
from hooklatch.forwarding.message import Message

# pika logs several ERROR lines for every connection that fails; the forward records the
# reason and the sender one line per outage, so its own lines say nothing more.
logging.getLogger("pika").setLevel(logging.CRITICAL)

PERSISTENT = 2  # AMQP's delivery mode for a message the broker writes to disk
SHORT_STRING = 255  # AMQP's limit, in bytes, on an exchange name and a routing key


class RabbitKind:
    name: ClassVar[str] = "rabbitmq"
    fields: ClassVar[Mapping[str, Field]] = {
        "url": Field(
            "the broker's amqp:// or amqps:// URL, with its user, password and virtual host",
            required=True,
            secret=True,
        ),
        "exchange": Field("the exchange published to (the default exchange: empty)", default=""),
        "routing_key": Field(
            "the routing key (the queue's name, on the default exchange)", required=True
        ),
    }

    def check(self, given: Mapping[str, str]) -> Connection:
        values = settings_of(self.name, self.fields, given)
        parts = checked_url(values["url"], schemes=("amqp", "amqps"))
        try:
            pika.URLParameters(values["url"])
        except ValueError:  # whose message quotes the URL's query
            raise ValueError("url has a query option that is not a valid AMQP one") from None
        for name in ("exchange", "routing_key"):
            if len(values[name].encode()) > SHORT_STRING:
                raise ValueError(f"{name} should be at most {SHORT_STRING} bytes long")
        return split(self.fields, values, shown=shown_url(parts))

    def open(self, connection: Connection, *, timeout: float) -> RabbitPublisher:
        return RabbitPublisher(
            connection.secrets["url"],
            exchange=connection.settings["exchange"],
            routing_key=connection.settings["routing_key"],
            timeout=timeout,
        )


class RabbitPublisher:
    """Connects on the first call; after a connection or channel error, the rest of the
    call fails and the next call connects again."""

    # Each message waits for its confirm before the next is published.
    at_once = 1

    def __init__(self, url: str, *, exchange: str, routing_key: str, timeout: float) -> None:
        self._parameters = pika.URLParameters(url)
        self._parameters.connection_attempts = 1
        self._parameters.socket_timeout = timeout
        self._parameters.stack_timeout = timeout
        self._parameters.blocked_connection_timeout = timeout
        self._exchange = exchange
        self._routing_key = routing_key
        self._connection: BlockingConnection | None = None
        self._channel: BlockingChannel | None = None

    def publish(self, messages: Sequence[Message]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        try:
            channel = self._open_channel()
            for message in messages:
                outcomes.append(self._send(channel, message))
        except (AMQPError, OSError) as error:
            self._drop()
            outcomes += failed(len(messages) - len(outcomes), _reason(error))
        return outcomes

    def close(self) -> None:
        self._drop()

    def _send(self, channel: BlockingChannel, message: Message) -> Outcome:
        """One message's outcome; a connection or channel error is raised."""
        properties = pika.BasicProperties(
            message_id=message.key,
            delivery_mode=PERSISTENT,
            content_type=message.content_type,
            type=message.type,
            headers=message.headers(),
            timestamp=int(message.received_at.timestamp()),
        )
        try:
            channel.basic_publish(
                self._exchange, self._routing_key, message.body, properties, mandatory=True
            )
        except UnroutableError:
            return Outcome(
                delivered=False,
                error=f"unroutable: no queue bound to exchange {self._exchange!r} "
                f"with routing key {self._routing_key!r}",
            )
        except NackError:
            return Outcome(delivered=False, error="refused by the broker (nack)")
        return Outcome(delivered=True)

    def _open_channel(self) -> BlockingChannel:
        """The channel, connecting first if there is none or the one there is closed (as
        the broker closes a connection left idle past its heartbeats)."""
        if self._channel is not None and self._still_open():
            return self._channel
        self._drop()
        connection = BlockingConnection(self._parameters)
        self._connection, self._channel = connection, connection.channel()
        self._channel.confirm_delivery()
        return self._channel

    def _still_open(self) -> bool:
        """Whether the connection and channel are open, once pika has read what the broker
        sent since the last call (heartbeats, or its closing the connection)."""
        assert self._connection is not None and self._channel is not None
        try:
            self._connection.process_data_events(time_limit=0)
        except (AMQPError, OSError):
            return False
        return bool(self._connection.is_open and self._channel.is_open)

    def _drop(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is None or not connection.is_open:
            return
        try:
            connection.close()
        except (AMQPError, OSError):
            return  # the connection is gone either way


def _reason(error: BaseException) -> str:
    if isinstance(error, ChannelClosed | ConnectionClosed):
        return f"closed by the broker: {error.reply_code} {error.reply_text}"
    return os_reason(error) or str(error) or type(error).__name__
