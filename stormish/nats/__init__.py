"""stormish.nats: NATS JetStream as a source and a sink of stormish topologies.

    from stormish.nats import JetStreamSpout, JetStreamSink

- `JetStreamSpout`: a durable pull consumer; a tree's ack is the message's ack, a fail
  its nak (with a delay), a dead letter its term, a bolt's reset_timeout its
  in_progress (spout.py, pull.py, client.py).
- `JetStreamSink`: publishes each input and acks it on the PubAck (sink.py,
  publisher.py).

Every NATS component of a worker process shares one asyncio loop thread (loop.py).
Names are loaded on first use and nats-py only when a component opens, so a topology
file can name these classes without the client installed. Needs `stormish[nats]`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"JetStreamSpout": "spout", "JetStreamSink": "sink"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'stormish.nats' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
