"""The control channel between a worker process and whoever runs it.

The local cluster (or nimbus) binds one ROUTER socket; each worker process connects a
DEALER whose identity names its index and process, says HELLO, and then answers
requests one at a time: assign (the pickled topology and configuration), peers (where
the other workers listen), start, quiescence, stats, active, stop. A request is `[verb,
id, payload]`, a reply `[status, id, payload]` with status `ok` or `error`; ids let the
caller drop a late reply to a request it gave up on. Nimbus's API (`cluster/api.py`)
uses the same framing with its own verbs.

No frame is larger than `PIECE` (1 MiB), and every socket of the channel and of nimbus's
API refuses one larger (`ZMQ_MAXMSGSIZE`: `MAX_FRAME`): libzmq reads a frame whole before
the CURVE handshake judges its sender, and a peer without keys that announced 500 MiB
was buffered (four such connections took nimbus to 2 GiB). A payload or code frame past
it (a large topology, a worker's statistics, a task's results) travels in pieces of at
most `PIECE` bytes, and the id frame lists how many pieces each frame after it came in
(8 bytes and a uint32 per frame); the receiver joins them before reading anything. An
older peer refuses such a message (its id is not 8 bytes) rather than misreading it.
Under keys only a peer that completed the handshake sends a message at all, so the
pieces of one are a keyed peer's to hold, as a submit's code is.

A payload is the safe format (`transport/wire.py`: JSON and a table of known records),
so reading a message runs no code whoever sent it. Code travels in a fourth frame, a
pickle, only where a verb needs it (`CODE`: the topology of `submit` and `assign`, the
results of `stop`), and is unpickled only when the receiver says its peer is
authenticated (`code_ok`: a CURVE-keyed socket) and after the verb is known: an unknown
verb, or code on a verb that takes none, is refused before anything is decoded.

The message shapes are pure functions here; the sockets live in `process.py` (worker
side), `control_server.py`, nimbus and its client.
"""

from __future__ import annotations

import struct
from typing import Any

import cloudpickle

from .. import pickling
from ..errors import StormishError
from . import wire

ID = struct.Struct("!Q")
PIECE = 1 << 20  # the largest frame sent
# ... and read (ZMQ_MAXMSGSIZE of every socket here): libzmq checks the frame on the wire,
# where CURVE wraps it in a MESSAGE command (33 bytes more)
MAX_FRAME = PIECE + 64
_COUNT = struct.Struct("!I")  # after the id: the pieces of one frame that follows it
VERBS = frozenset(
    {
        "hello",
        "beat",
        "assign",
        "peers",
        "start",
        "quiescence",
        "stats",
        "active",
        "end_input",
        "stop",
        "ping",
    }
)
# verbs whose request is code (a pickle in the fourth frame): nothing else may carry one
CODE = frozenset({"assign", "submit"})
# reply fields that only a pickle can carry (a task's results are the user's objects)
CODE_FIELDS = {"stop": ("results",)}
OK, ERROR = b"ok", b"error"
_NONE = b"null"


class ControlError(StormishError):
    """A control message that cannot be read, or that carries what it may not."""


class PayloadError(ControlError):
    """A request whose verb and id were read but whose payload was not: the sender can
    be told why (nimbus answers a submit whose code does not unpickle here)."""

    def __init__(self, message: str, verb: str, req_id: int):
        super().__init__(message)
        self.verb, self.req_id = verb, req_id


def request(
    verb: str, req_id: int, payload: Any = None, verbs: frozenset[str] = VERBS
) -> list[Any]:
    if verb not in verbs:
        raise ControlError(f"unknown control verb {verb!r}")
    if verb in CODE:
        return _framed(verb.encode(), req_id, [_NONE, pickling.dumps(payload)])
    return _framed(verb.encode(), req_id, [_safe(payload, verb)])


def reply(req_id: int, payload: Any, ok: bool = True, code: Any = None) -> list[Any]:
    """`code`: a dict of fields that only a pickle can carry (a task's results), merged
    into the payload dict by a receiver that trusts its peer, dropped by one that does
    not."""
    body = [_safe(payload, "reply")]
    if code is not None:
        body.append(pickling.dumps(code))
    return _framed(OK if ok else ERROR, req_id, body)


def _framed(head: bytes, req_id: int, body: list[bytes]) -> list[Any]:
    """`[head, id, *body]`, a frame of `body` past `PIECE` bytes cut in pieces (views,
    not copies) and their counts after the id."""
    if all(len(b) <= PIECE for b in body):
        return [head, ID.pack(req_id), *body]
    table: list[bytes] = [ID.pack(req_id)]
    out: list[Any] = [head, b""]
    for frame in body:
        view = memoryview(frame)
        pieces = [view[at : at + PIECE] for at in range(0, max(1, len(view)), PIECE)]
        table.append(_COUNT.pack(len(pieces)))
        out += pieces
    out[1] = b"".join(table)
    return out


def _joined(frames: list[Any]) -> list[Any]:
    """`frames` with each frame's pieces joined again (`_framed`); as they are when none
    was cut. Raises ControlError on a table that does not match the frames."""
    if len(frames) < 2 or len(frames[1]) == ID.size:
        return frames
    table = frames[1]
    extra = len(table) - ID.size
    if extra < _COUNT.size or extra % _COUNT.size or extra > 2 * _COUNT.size:
        raise ControlError(
            f"a control message has an 8-byte id (and a 4-byte piece count for each of "
            f"its 1 or 2 frames after it, when they came in pieces): got {len(table)} bytes"
        )
    counts = struct.unpack_from(f"!{extra // _COUNT.size}I", table, ID.size)
    if 0 in counts or sum(counts) != len(frames) - 2:
        raise ControlError(
            f"a control message's piece counts {list(counts)} do not match its "
            f"{len(frames) - 2} frames after the id"
        )
    out, at = [frames[0], bytes(table[: ID.size])], 2
    for n in counts:
        out.append(frames[at] if n == 1 else b"".join(frames[at : at + n]))
        at += n
    return out


def answer(verb: str, req_id: int, value: Any) -> list[Any]:
    """The reply to `verb`: its `CODE_FIELDS` travel in the code frame."""
    fields = CODE_FIELDS.get(verb)
    if fields and isinstance(value, dict):
        value = dict(value)
        return reply(req_id, value, code={f: value.pop(f) for f in fields if f in value})
    return reply(req_id, value)


def decode_request(
    frames: list[Any], verbs: frozenset[str] = VERBS, code_ok: bool = False
) -> tuple[str, int, Any]:
    """(verb, id, payload). The verb is checked first; code is unpickled only for a
    verb in `CODE` and only when `code_ok` (the peer is authenticated)."""
    frames = _joined(frames)
    if len(frames) not in (3, 4) or len(frames[1]) != ID.size:
        raise ControlError("a control request has 3 or 4 frames with an 8-byte id")
    name = bytes(frames[0]).decode("ascii", "replace")
    if name not in verbs:
        raise ControlError(f"unknown control verb {name[:40]!r}")
    req_id = ID.unpack(frames[1])[0]
    if (len(frames) == 4) != (name in CODE):
        what = "carries no code" if name not in CODE else "carries code in its fourth frame"
        raise ControlError(f"control request {name!r}: the verb {what}")
    try:
        if name in CODE:
            if not code_ok:
                raise ControlError(
                    f"refusing {name!r}: it carries code, and the peer is not authenticated "
                    "(a keyed socket lets in only holders of the cluster's keys)"
                )
            return name, req_id, _unpickle(frames[3], name)
        return name, req_id, _load(frames[2], f"request {name!r}")
    except ControlError as exc:
        raise PayloadError(str(exc), name, req_id) from exc.__cause__


def decode_reply(frames: list[Any], code_ok: bool = False) -> tuple[bool, int, Any]:
    """(ok, id, payload); a code frame is merged into a dict payload when `code_ok`,
    and never unpickled otherwise."""
    frames = _joined(frames)
    if len(frames) not in (3, 4) or len(frames[1]) != ID.size:
        raise ControlError("a control reply has 3 or 4 frames with an 8-byte id")
    status = bytes(frames[0])
    if status not in (OK, ERROR):
        raise ControlError(f"control reply status must be ok or error, got {status[:20]!r}")
    payload = _load(frames[2], "reply")
    if len(frames) == 4 and code_ok and isinstance(payload, dict):
        extra = _unpickle(frames[3], "reply")
        if not isinstance(extra, dict):
            raise ControlError("a control reply's code frame must hold a dict of fields")
        payload.update(extra)
    return status == OK, ID.unpack(frames[1])[0], payload


def _safe(payload: Any, what: str) -> bytes:
    try:
        return wire.dumps(payload)
    except wire.WireError as exc:
        raise ControlError(f"control {what}: {exc}") from None


def _load(frame: bytes, what: str) -> Any:
    try:
        return wire.loads(bytes(frame))
    except wire.WireError as exc:
        raise ControlError(f"control {what} payload cannot be read: {exc}") from None


def _unpickle(frame: bytes, what: str) -> Any:
    try:
        return cloudpickle.loads(frame)
    except ModuleNotFoundError as exc:
        raise ControlError(
            f"{what}: its code cannot be unpickled here: {exc} (a module a topology "
            "imports must be installed where nimbus and the workers run)"
        ) from exc
    except Exception as exc:
        raise ControlError(f"control {what}: its code cannot be unpickled: {exc}") from exc
