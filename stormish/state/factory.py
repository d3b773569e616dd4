"""Which store a namespace's state lives in (Storm's StateFactory), from the config.

`topology.state.provider`:
- `embedded`: a SQLite file per namespace under `topology.state.dir`, else under the
  worker's data directory (`STORMISH_WORKER_DATA`, set by whoever starts the worker: the
  local cluster, a directory kept across the run's worker restarts; a supervisor, its
  state directory). A worker with neither runs in the submitting process and cannot be
  restarted: its state is an in-memory SQLite database.
- `redis`: a hash per namespace on `topology.state.redis.url` (redis.py).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..plugins import DATA_ENV
from .kv import KeyValueState, Store


def open_store(namespace: str, conf: Mapping[str, Any], topology: str) -> Store:
    provider = conf.get("topology.state.provider", "embedded")
    if provider == "redis":
        from .redis import RedisStore

        return RedisStore(conf["topology.state.redis.url"], f"{topology}:{namespace}")
    from .sqlite import SqliteStore, db_path

    directory = conf.get("topology.state.dir")
    if not directory:
        data = os.environ.get(DATA_ENV)
        if not data:
            return SqliteStore(":memory:")
        directory = os.path.join(data, "state")
        return SqliteStore(db_path(directory, topology, namespace))
    try:
        return SqliteStore(db_path(directory, topology, namespace))
    except (OSError, sqlite3.Error) as exc:
        # a file where the directory should be, no permission: each stateful task said
        # NotADirectoryError on a path, never which setting made it
        why = getattr(exc, "strerror", None) or str(exc)
        path = getattr(exc, "filename", None)
        raise ConfigError(
            f"config key 'topology.state.dir' ({directory!r}) of topology {topology!r}: "
            f"the embedded state of {namespace!r} cannot be kept there: {why}"
            + (f" ({path})" if path else "")
        ) from None


def open_state(conf: Mapping[str, Any], context: Any) -> KeyValueState:
    """The state of this task: namespace COMPONENT-TASK, as Storm's."""
    namespace = f"{context.component_id}-{context.task_id}"
    return KeyValueState(open_store(namespace, conf, context.topology_name), namespace)
