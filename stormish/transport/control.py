"""The control channel between a worker process and whoever runs it.

The local cluster today (a supervisor later) binds one ROUTER socket; each worker process
connects a DEALER whose identity names its index and process, says HELLO, and then
answers requests one at a time: assign (the pickled topology and configuration), peers
(where the other workers listen), start, quiescence, stats, active, stop. A request is
`[verb, id, payload]`, a reply `[status, id, payload]` with status `ok` or `error`; ids let
the caller drop a late reply to a request it gave up on. Payloads are cloudpickled (the
topology is code), so this socket is secured like every socket that carries a pickle
(`transport.security`).

The message shapes are pure functions here; the sockets live in `process.py` (worker
side) and `workers.py` (cluster side).
"""

from __future__ import annotations

import struct
from typing import Any

import cloudpickle

from .. import pickling
from ..errors import StormishError

ID = struct.Struct("!Q")
VERBS = frozenset(
    {"hello", "assign", "peers", "start", "quiescence", "stats", "active", "stop", "ping"}
)
OK, ERROR = b"ok", b"error"


class ControlError(StormishError):
    """A control message that cannot be read."""


def request(
    verb: str, req_id: int, payload: Any = None, verbs: frozenset[str] = VERBS
) -> list[bytes]:
    if verb not in verbs:
        raise ControlError(f"unknown control verb {verb!r}")
    return [verb.encode(), ID.pack(req_id), pickling.dumps(payload)]


def reply(req_id: int, payload: Any, ok: bool = True) -> list[bytes]:
    return [OK if ok else ERROR, ID.pack(req_id), pickling.dumps(payload)]


def decode_request(frames: list[bytes], verbs: frozenset[str] = VERBS) -> tuple[str, int, Any]:
    verb, req_id, payload = _three(frames, "request")
    name = verb.decode("ascii", "replace")
    if name not in verbs:
        raise ControlError(f"unknown control verb {name!r}")
    return name, req_id, payload


def decode_reply(frames: list[bytes]) -> tuple[bool, int, Any]:
    status, req_id, payload = _three(frames, "reply")
    if status not in (OK, ERROR):
        raise ControlError(f"control reply status must be ok or error, got {status!r}")
    return status == OK, req_id, payload


def _three(frames: list[bytes], what: str) -> tuple[bytes, int, Any]:
    if len(frames) != 3 or len(frames[1]) != ID.size:
        raise ControlError(f"a control {what} has 3 frames with an 8-byte id")
    try:
        payload = cloudpickle.loads(frames[2])
    except Exception as exc:
        raise ControlError(f"control {what} payload cannot be unpickled: {exc}") from exc
    return bytes(frames[0]), ID.unpack(frames[1])[0], payload
