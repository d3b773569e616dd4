"""stormish.kafka: Kafka as a source and a sink of stormish topologies.

    from stormish.kafka import KafkaSpout, KafkaSink

- `KafkaSpout`: reads topics with Storm's processing guarantees (spout.py).
- `KafkaSink`: produces each tuple and acks it on the delivery report (sink.py).

Names are loaded on first use and confluent-kafka only when a task opens or prepares,
so a topology file can name these classes where the client is not installed. Needs the
`stormish[kafka]` extra (confluent-kafka). See docs/connectors.md.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "KafkaSpout": "spout",
    "KafkaSink": "sink",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'stormish.kafka' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
