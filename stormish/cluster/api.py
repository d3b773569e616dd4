"""What clients and supervisors ask nimbus, on its API socket.

The same framing as the worker control channel (`transport/control.py`: verb, id,
payload in the safe format; status, id, payload), with nimbus's verbs. `submit` carries
the topology's code, so the socket is secured like every socket that carries a pickle.

A request with more than one value is a typed message (below), registered with the
wire so it crosses as a record, never as a tuple read by position. `message()` also takes
the tuples older clients sent ((name, wait) for kill, and so on).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import StormishError
from ..transport.wire import record

API_VERBS = frozenset(
    {
        "submit",  # Submit -> name
        "list",  # None -> [summary per topology]
        "kill",  # Kill -> the wait (s), or the status an ended topology had (it is removed)
        "activate",  # name -> status
        "deactivate",  # name -> status
        "rebalance",  # Rebalance -> None
        "stats",  # name -> TopologyStatistics (final once it ended)
        "heartbeat",  # a supervisor's report (+ log pieces) -> {wanted workers, LogAsks}
        "logs",  # LogsRequest -> request id
        "logs_result",  # request id -> {done, pieces, missing}
        "supervisors",  # None -> [the supervisors nimbus hears from]
        "graph",  # name -> the plan's components and edges (stormish plan --json's shape)
        "leader",  # None -> {id, leading, leader: {id, api, control} or None, ha, term}
    }
)


@dataclass(frozen=True)
class Submit:
    """A topology and its config overrides; `active=False`: no spout opens until
    `activate` (Storm's --inactive). Travels as code (a pickle), as the topology must."""

    topology: Any
    conf: dict[str, Any] = field(default_factory=dict)
    active: bool = True


@dataclass(frozen=True)
class Kill:
    name: str
    # seconds between deactivating the spouts and stopping the workers; None: the
    # topology's topology.message.timeout.secs, as `storm kill` waits by default
    wait: float | None = None


@dataclass(frozen=True)
class Rebalance:
    name: str
    workers: int
    # seconds the spouts stay deactivated before the workers restart, so that trees in
    # flight complete; None: the topology's topology.message.timeout.secs (`storm
    # rebalance -w`'s default)
    wait: float | None = None


@dataclass(frozen=True)
class LogsRequest:
    """`stormish logs`: a topology's worker logs (one worker, or all: None) from the
    offsets already read (`{"index@supervisor": offset}`), at most `most` bytes each."""

    name: str
    index: int | None = None
    offsets: dict[str, int] = field(default_factory=dict)
    most: int = 64 * 1024


@dataclass(frozen=True)
class LogAsk:
    """Nimbus to a supervisor (in its heartbeat's answer): a piece of a worker's log."""

    rid: int
    topology: str
    index: int
    offset: int | None
    most: int


for _cls in (Kill, Rebalance, LogsRequest, LogAsk):
    record(_cls)

_TUPLES: dict[str, type] = {"submit": Submit, "kill": Kill, "rebalance": Rebalance,
                            "logs": LogsRequest}  # fmt: skip


def message(verb: str, payload: Any) -> Any:
    """The typed message of `verb` from what arrived: the message itself, or the tuple
    an older client sent (its fields in order)."""
    cls = _TUPLES.get(verb)
    if cls is None or isinstance(payload, cls):
        return payload
    if isinstance(payload, tuple | list):
        try:
            return cls(*payload)
        except TypeError as exc:
            raise StormishError(f"{verb}: {exc}") from None
    raise StormishError(f"{verb} expects a {cls.__name__}, got {type(payload).__name__}")
