"""Forwarding: each processed event handed on to the systems behind hooklatch (an HTTP
receiver, NATS JetStream, RabbitMQ, Redis Streams), carrying its idempotency key.

A forward is recorded in the transaction that processes its event (``record``) and
delivered by a relay's forwarder, at least once, with retries to a dead state per
destination (``sending``). Destinations and their encrypted settings: ``destinations``;
what travels: ``message``; one module per kind: ``kinds``.
"""
