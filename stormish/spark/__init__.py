"""stormish.spark: Spark as a source and a sink of stormish topologies.

    from stormish.spark import SparkSpout, SparkSink

- `SparkSpout`: drains a DataFrame (a function of the session, a table or a path) with
  backpressure, deterministic message ids and replay on fail (spout.py, drain.py).
- `SparkSink`: micro-batches tuples into exactly-once commits to a Parquet directory
  (pyarrow, no JVM) or through a SparkSession (sink.py, commit.py, commit_spark.py).
- `session(conf)`: the SparkSession they use (session.py).

Names are loaded on first use: `import stormish.spark` imports neither pyspark nor
pyarrow, so a topology file can name these classes without paying for Spark.
Needs the `stormish[spark]` extra (pyspark[sql], pyarrow, pandas<3).
"""

from __future__ import annotations

import importlib
from typing import Any

# `session` is imported now (session.py imports no pyspark): loaded lazily, the first
# `import stormish.spark.session` elsewhere would rebind this package's `session` to
# the submodule, and `from stormish.spark import session` would then give a module.
from .session import session as session

_EXPORTS = {
    "Drain": "drain",
    "Chunk": "drain",
    "ParquetCommitter": "commit",
    "SparkCommitter": "commit_spark",
    "KeyLedger": "keys",
    "SparkSpout": "spout",
    "SparkSink": "sink",
    "ROW_ID": "spout",
    "SparkSourceError": "errors",
    "SparkSinkError": "errors",
    "WouldBlock": "errors",
}

__all__ = sorted([*_EXPORTS, "session"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'stormish.spark' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
