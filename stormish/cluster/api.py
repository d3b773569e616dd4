"""What clients and supervisors ask nimbus, on its API socket.

The same framing as the worker control channel (`transport/control.py`: verb, id,
cloudpickled payload; status, id, payload), with nimbus's verbs. `submit` carries the
topology's code, so the socket is secured like every socket that carries a pickle.
"""

from __future__ import annotations

API_VERBS = frozenset(
    {
        "submit",  # (topology, config overrides) -> name
        "list",  # None -> [summary per topology]
        "kill",  # (name, wait seconds) -> None
        "activate",  # name -> None
        "deactivate",  # name -> None
        "rebalance",  # (name, workers) -> None
        "stats",  # name -> TopologyStatistics (final once it ended)
        "heartbeat",  # a supervisor's report (+ log pieces) -> {wanted workers, log asks}
        "logs",  # (name, worker or None, offsets, max bytes) -> request id
        "logs_result",  # request id -> {done, pieces, missing}
        "supervisors",  # None -> [the supervisors nimbus hears from]
        "graph",  # name -> the plan's components and edges (stormish plan --json's shape)
    }
)
