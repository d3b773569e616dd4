"""The versioned wire format between workers: ZeroMQ multipart messages, encoded and decoded.

Pure functions, no sockets, so the format is tested on its own and a peer's garbage ends
as one `FrameError` that names the frame and the reason, never as a crash in a socket
thread. Frame 0 of every message is a fixed 18-byte header (magic `SMSH`, version, kind,
sender worker id, sequence) parsed with one precompiled `struct.Struct`; the body follows.

Tuple batches use pickle protocol 5 so that big buffers travel as frames of their own,
never copied into the pickle: numpy or pyarrow buffers of at least `OOB_THRESHOLD` bytes,
and `bytes` and `bytearray` of that size (pickle always writes those in-band, so they are
turned into out-of-band buffers by a second, slower pass that runs only when the first
pickle holds one; the receiver copies them out, as a `bytes` cannot live in a buffer).
Between workers on one host those buffers go through shared memory instead (SHM_TUPLES:
the pickle and the buffers' places in the sender's segments, `shm.py`). Everything else
(hello, backpressure status, heartbeat, control, releases) is small and is never
unpickled: a buggy or hostile peer must not reach an unpickler with a control message.
Status is a `struct`, the dictionaries are JSON.

No frame on a link is larger than `PIECE` (16 MiB): a worker's link socket refuses one
larger (`ZMQ_MAXMSGSIZE`: `MAX_FRAME`), as libzmq reads a frame whole before the CURVE
handshake judges its sender (a peer without keys that announced 500 MiB was buffered).
A message with a larger frame (one tuple's 64 MiB array, a pickle of large strs) goes
as a PIECES message (`in_pieces`): its frames cut in pieces of at most `PIECE` bytes
and a table of each frame's piece count; `decode` joins them (one copy, only of what
was cut) and decodes the message they make. A message's buffers are cut to about
16 MiB already (`link.MESSAGE_BYTES`), so only a single buffer or pickle past it pays.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import IO, Any, TypeAlias

from .. import rowcodec
from ..errors import StormishError
from ..tuple import RejectedRows, StampedRows
from .tracker import BackpressureStatus

MAGIC = b"SMSH"
VERSION = 1
OOB_THRESHOLD = 64 * 1024
PIECE = 16 * 1024 * 1024  # the largest frame sent on a link (link.MESSAGE_BYTES)
# ... and read (the link socket's ZMQ_MAXMSGSIZE): libzmq checks the frame on the wire,
# where CURVE wraps it in a MESSAGE command (33 bytes more)
MAX_FRAME = PIECE + 64
HEADER = struct.Struct("!4sBBIQ")  # magic, version, kind, sender worker id, sequence
_STATUS = struct.Struct("!IQII")  # worker id, status id, number of bp / non-bp task ids

Frame = bytes | memoryview | pickle.PickleBuffer
# (dest_task, src_task, stream, values, metas_or_None): a batch for another worker
WireBatch: TypeAlias = tuple[int, int, str, Any, list[Any] | None]
# (src_task, stream, value rows, per-row tree ids or None when untracked): a batch as a
# task's receive queue holds it (runtime.seams re-exports it as `Batch`)
Batch: TypeAlias = tuple[int, str, list[Any], list[Any] | None]


class Kind(IntEnum):
    HELLO = 1
    TUPLES = 2
    BP_STATUS = 3
    # 4, 5 and 6 (EOS, EOS_ACK, HEARTBEAT) were never sent and are retired: a peer that
    # sends them gets FrameError (unknown kind); never give their numbers to a new kind
    CONTROL = 7
    SHM_TUPLES = 8  # a TUPLES message whose large buffers are in the sender's segments
    SHM_RELEASE = 9  # the receiver is done with these segments of the sender's
    BULK = 10  # sealed large buffers, on a bulk socket only (bulk.py), never on a link
    BULK_TUPLES = 11  # a TUPLES message whose large buffers went sealed (bulk.py)
    PIECES = 12  # another message whose frames were cut to PIECE bytes (`in_pieces`)


class FrameError(StormishError, ValueError):
    """A received message cannot be decoded; the message names the frame and the reason."""


@dataclass(frozen=True, slots=True)
class Message:
    """A decoded message. `body` by kind: TUPLES a list of `WireBatch` tuples, BP_STATUS a
    `BackpressureStatus`, HELLO a `Hello`, CONTROL a dict (a peer's epoch), SHM_TUPLES
    an `ShmTuples` (not unpickled yet: `load_tuples` with the mapped buffers),
    SHM_RELEASE (pool token, segment numbers)."""

    kind: Kind
    sender: int
    seq: int
    body: Any


@dataclass(frozen=True, slots=True)
class ShmTuples:
    """The pickle of a TUPLES message, the references (`shm.Reader.views`) of its
    out-of-band buffers in the sender's shared-memory segments, and its row count (what
    a receiver that drops it unread counts)."""

    pickle: Any
    refs: Any
    tuples: int = 0


@dataclass(frozen=True, slots=True)
class BulkTuples:
    """The pickle of a TUPLES message and the counters of its out-of-band buffers, sealed
    on the sender's bulk socket (`bulk.Receiver.open`)."""

    pickle: Any
    first: int
    count: int
    tuples: int


@dataclass(frozen=True, slots=True)
class Hello:
    topology_id: str
    worker_port_info: dict


def _header(kind: Kind, sender: int, seq: int) -> bytes:
    try:
        return HEADER.pack(MAGIC, VERSION, kind, sender, seq)
    except struct.error:
        raise ValueError(
            f"cannot encode a {kind.name} header: sender {sender!r} must be a uint32 and "
            f"seq {seq!r} a uint64"
        ) from None


class _OobBytesPickler(pickle.Pickler):
    """Pickles large `bytes` as out-of-band buffers (the slow pass, see module doc).

    A `bytes` seen before (by identity) becomes its index among the buffers, so a value
    shared by several rows travels once.
    """

    def __init__(
        self, file: IO[bytes], protocol: int, buffer_callback: Callable[[Any], Any]
    ) -> None:
        super().__init__(file, protocol=protocol, buffer_callback=buffer_callback)
        self._seen: dict[int, int] = {}

    def persistent_id(self, obj: Any) -> Any:
        kind = type(obj)
        if (kind is not bytes and kind is not bytearray) or len(obj) < OOB_THRESHOLD:
            return None
        index = self._seen.get(id(obj))
        if index is not None:
            return index
        self._seen[id(obj)] = len(self._seen)
        if kind is bytearray:  # pickle writes it in-band too; it must load as a bytearray
            return ("a", pickle.PickleBuffer(obj))
        return pickle.PickleBuffer(obj)


class Packed:
    """A batch's rows already pickled (`pack`): by the emitting executor when it hands the
    batch to another worker, while the rows are still in its CPU's caches, and unpickled
    (`rows`) by the receiving task when it takes the batch, right before it runs them.
    Between those two points the rows are one `bytes`: the link copies it into a message
    and out again, and a receive queue or overflowQ holds one object, not a row object
    per tuple. `len` is the row count (queues, outboxes and backpressure count tuples)."""

    __slots__ = ("data", "n")
    malformed = 0  # packs that did not decode, in this process (link statistics)

    def __init__(self, data: bytes, n: int):
        self.data = data
        self.n = n

    def __len__(self) -> int:
        return self.n

    def rows(self) -> list[Any]:
        """The rows; an undecodable blob or a wrong row count raises `FrameError`."""
        data = self.data
        if data[:1] == rowcodec.MAGIC:  # typed rows (a pickle starts with PROTO, 0x80)
            return _typed(rowcodec.unpack_rows, data, self.n, "rows")
        try:
            rows = pickle.loads(data)
        except Exception as e:  # a corrupt pickle can raise almost anything
            raise FrameError(f"undecodable packed rows: {type(e).__name__}: {e}") from None
        if type(rows) is not list or len(rows) != self.n:
            raise FrameError(f"packed rows: a list of {self.n} rows expected")
        return rows


PACK_MIN_ROWS = 16  # smaller batches cross as they are (a pickle call costs ~1 us)


class _LargeBuffer(Exception):
    """A row holds a buffer for the zero-copy path: stop pickling the pack there (a
    batch of 512 KiB arrays was pickled whole, in band, only to be dropped)."""


def _small_in_band(buf: pickle.PickleBuffer) -> bool:
    if memoryview(buf).nbytes >= OOB_THRESHOLD:
        raise _LargeBuffer
    return True  # true: pickled in band


def pack(values: Any) -> Packed | None:
    """`values` (a plain list of rows) pickled for another worker, or None when it should
    cross as it is: an edge with an age or a fan-out's rejection (not a plain list), a
    few rows, or rows that hold a large buffer (those take the zero-copy or
    shared-memory path of `encode_tuples`, which needs the buffers themselves)."""
    if type(values) is not list or len(values) < PACK_MIN_ROWS:
        return None
    typed = rowcodec.pack_rows
    if typed is not None:  # compiled: flat rows of plain values skip pickle
        data = typed(values)
        if data is not None and len(data) < OOB_THRESHOLD:  # else: may hold a large bytes
            return Packed(data, len(values))
    try:
        out = io.BytesIO()
        fast = pickle.Pickler(out, protocol=5, buffer_callback=_small_in_band)
        fast.fast = True
        fast.dump(values)
    except Exception:  # noqa: BLE001 - a large buffer, self-referring or odd rows: the full path decides
        return None
    data = out.getvalue()
    if len(data) >= OOB_THRESHOLD and _may_hold_large_bytes(data):
        return None
    return Packed(data, len(values))


def unpack(batches: list[Batch]) -> list[Batch]:
    """`batches` as a receive queue hands them out, with packed rows made rows again. A
    pack that does not decode (a peer's bug: peers are authenticated) is counted in
    `Packed.malformed` and its rows are lost (tracked ones time out and replay)."""
    out = batches
    for i, b in enumerate(batches):
        values = b[2]
        if values.__class__ is Packed:
            if out is batches:
                out = list(batches)
            metas = b[3]
            try:
                if metas.__class__ is bytes:  # typed tree ids (rowcodec.pack_metas)
                    metas = _typed(rowcodec.unpack_metas, metas, values.n, "metas")
                out[i] = (b[0], b[1], values.rows(), metas)
            except FrameError:
                Packed.malformed += 1
                out[i] = (b[0], b[1], [], None)
    return out


def _typed(read: Callable[[Any, int], list[Any]], data: Any, n: int, what: str) -> list[Any]:
    """`n` typed rows or tree ids read by `read` (rowcodec); anything wrong, FrameError."""
    try:
        return read(data, n)
    except Exception as e:  # noqa: BLE001 - ValueError, or memory for a forged size
        raise FrameError(f"undecodable packed {what}: {e}") from None


def pack_metas(metas: Any) -> Any:
    """A tracked batch's tree ids typed (bytes) to cross beside its packed rows, or as
    they are: compiled only (rowcodec), and only plain (root, edge) int pairs."""
    typed = rowcodec.pack_metas
    if typed is None or type(metas) is not list:
        return metas
    data = typed(metas)
    return metas if data is None else data


def encode_tuples(sender: int, seq: int, batches: Iterable[WireBatch]) -> list[Frame]:
    """Frames for tuple batches `(dest_task, src_task, stream, values, metas_or_None)`.

    Frame 1 is the pickle, frames 2.. its out-of-band buffers. Those are views of the
    values themselves (zero-copy): values must not change until the frames are sent.
    """
    # packed rows travel as their bytes and a row count: (dest, src, stream, data, metas, n)
    payload = [
        tuple(b) if b[3].__class__ is not Packed else (*b[:3], b[3].data, b[4], b[3].n)
        for b in batches
    ]
    buffers: list[pickle.PickleBuffer] = []

    def out_of_band(buf: pickle.PickleBuffer) -> bool:
        if memoryview(buf).nbytes < OOB_THRESHOLD:
            return True  # in-band: a frame per small buffer costs more than a copy
        buffers.append(buf)
        return False

    try:
        # no memo: tuple values are trees, rarely shared, and memoising every tuple and
        # string cost 71 ns a tuple against 26 ns without (and 74 vs 59 ns to load)
        out = io.BytesIO()
        fast = pickle.Pickler(out, protocol=5, buffer_callback=out_of_band)
        fast.fast = True
        fast.dump(payload)
        data: bytes = out.getvalue()
    except (RecursionError, ValueError):  # a value that refers to itself needs the memo
        buffers.clear()
        data = pickle.dumps(payload, protocol=5, buffer_callback=out_of_band)
    if len(data) >= OOB_THRESHOLD and _may_hold_large_bytes(data):
        buffers.clear()
        out = io.BytesIO()
        _OobBytesPickler(out, protocol=5, buffer_callback=out_of_band).dump(payload)
        data = out.getvalue()
    return [_header(Kind.TUPLES, sender, seq), data, *buffers]


# Opcodes of protocol 4+ pickles that `_may_hold_large_bytes` steps over outside frames.
_FRAME, _BINUNICODE, _BINUNICODE8, _BYTEARRAY8 = 0x95, 0x58, 0x8D, 0x96
_BARE_OPS = frozenset(b"\x94ae(\x85\x86\x87t.])Nsub0}R\x88\x89")  # no argument
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


def _may_hold_large_bytes(data: bytes) -> bool:
    """False only if `data` holds no `bytes` of `OOB_THRESHOLD` bytes or more.

    Pickle writes an object of 64 KiB or more outside its 64 KiB frames, so walking the
    frames finds every such object in a few steps. Anything unexpected answers True: the
    caller then pays for the slow pass, never for a missed buffer.
    """
    i, end = 2, len(data)  # after PROTO 5
    while i < end:
        op = data[i]
        if op == _FRAME:
            i += 9 + _U64.unpack_from(data, i + 1)[0]
        elif op in _BARE_OPS:
            i += 1
        elif op == _BINUNICODE:
            i += 5 + _U32.unpack_from(data, i + 1)[0]
        elif op == _BINUNICODE8:
            i += 9 + _U64.unpack_from(data, i + 1)[0]
        elif op == _BYTEARRAY8:
            size = _U64.unpack_from(data, i + 1)[0]
            if size >= OOB_THRESHOLD:
                return True
            i += 9 + size
        else:
            return True
    return False


_SHM_TUPLES = struct.Struct("!I")  # after the references: the message's row count


def as_shm(frames: list[Frame], refs: bytes, tuples: int = 0) -> list[Frame]:
    """The TUPLES message `frames` (from `encode_tuples`) with its out-of-band buffers
    replaced by `refs`, their places in shared memory, and its row count."""
    _, _, _, sender, seq = HEADER.unpack(frames[0])
    return [_header(Kind.SHM_TUPLES, sender, seq), frames[1], refs + _SHM_TUPLES.pack(tuples)]


_BULK_REFS = struct.Struct("!QII")  # first counter, buffers, tuples


def as_bulk(frames: list[Frame], first: int, count: int, tuples: int) -> list[Frame]:
    """The TUPLES message `frames` with its out-of-band buffers replaced by the counters
    they were sealed under on the bulk socket (bulk.py), and its row count."""
    _, _, _, sender, seq = HEADER.unpack(frames[0])
    refs = _BULK_REFS.pack(first, count, tuples)
    return [_header(Kind.BULK_TUPLES, sender, seq), frames[1], refs]


def bulk_header(sender: int, first: int) -> bytes:
    """Frame 0 of a bulk socket's message: its sealed buffers' first counter as seq."""
    return _header(Kind.BULK, sender, first)


def bulk_head(frames: Sequence[Any]) -> tuple[int, int] | None:
    """(sender, first counter) of a bulk socket's message; None when it is not one."""
    if len(frames) < 2 or len(frames[0]) != HEADER.size:
        return None
    magic, version, kind, sender, first = HEADER.unpack_from(frames[0])
    if magic != MAGIC or version != VERSION or kind != Kind.BULK:
        return None
    return sender, first


def encode_release(sender: int, token: bytes, segments: Sequence[int]) -> list[Frame]:
    """Segments of the pool named by `token` (4 bytes: a restarted peer has another)."""
    return [
        _header(Kind.SHM_RELEASE, sender, 0),
        token + struct.pack(f"!I{len(segments)}I", len(segments), *segments),
    ]


_COUNT = struct.Struct("!I")
_PIECES = Kind.PIECES.value  # an int: `decode` compares every message's kind with it


def in_pieces(frames: list[Frame]) -> list[Frame]:
    """`frames` (a message) as a PIECES message when one is past `PIECE` bytes: each cut
    in views of at most `PIECE` bytes (no copy; values must not change until sent)."""
    if all(memoryview(f).nbytes <= PIECE for f in frames):
        return frames
    _, _, _, sender, seq = HEADER.unpack(frames[0])
    counts: list[int] = []
    out: list[Frame] = [_header(Kind.PIECES, sender, seq), b""]
    for f in frames:
        view = f.raw() if type(f) is pickle.PickleBuffer else memoryview(f).cast("B")
        pieces = [view[at : at + PIECE] for at in range(0, max(1, view.nbytes), PIECE)]
        counts.append(len(pieces))
        out += pieces
    out[1] = struct.pack(f"!{len(counts)}I", *counts)
    return out


def _joined(frames: Sequence[Any]) -> list[Any]:
    """The frames of the message a PIECES message carries, each joined from its pieces:
    the pickle (frame 1) as `bytes`, the others (out-of-band buffers) as a writable
    `bytearray`, as a received ZeroMQ frame is."""
    if len(frames) < 4:
        raise FrameError(f"wrong frame count for PIECES: {len(frames)}, expected at least 4")
    table = frames[1]
    if len(table) < 2 * _COUNT.size or len(table) % _COUNT.size:
        raise FrameError(f"frame 1: a PIECES table of {len(table)} bytes, for 2 frames or more")
    counts = struct.unpack_from(f"!{len(table) // _COUNT.size}I", table)
    if 0 in counts or sum(counts) != len(frames) - 2:
        raise FrameError(
            f"PIECES: piece counts {list(counts)[:8]} do not match its {len(frames) - 2} frames"
        )
    out: list[Any] = []
    at = 2
    for i, n in enumerate(counts):
        pieces = frames[at : at + n]
        at += n
        if n == 1:
            out.append(pieces[0])
        else:
            out.append(b"".join(pieces) if i == 1 else bytearray().join(pieces))
    return out


def _json(kind: Kind, payload: dict) -> bytes:
    if not isinstance(payload, dict):
        raise TypeError(f"a {kind.name} payload must be a dict, got {type(payload).__name__}")
    return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()


def encode_hello(sender: int, seq: int, topology_id: str, worker_port_info: dict) -> list[Frame]:
    """The first message on a connection. JSON: dict keys arrive as strings."""
    body = {"topology_id": topology_id, "worker_port_info": worker_port_info}
    return [_header(Kind.HELLO, sender, seq), _json(Kind.HELLO, body)]


def encode_status(sender: int, seq: int, status: BackpressureStatus) -> list[Frame]:
    """Task ids travel as uint32, sorted (the order carries no meaning)."""
    bp, free = sorted(status.bp_tasks), sorted(status.non_bp_tasks)
    try:
        body = _STATUS.pack(status.worker_id, status.status_id, len(bp), len(free))
        tasks = struct.pack(f"!{len(bp) + len(free)}I", *bp, *free)
    except struct.error:
        raise ValueError(
            f"cannot encode backpressure status {status.status_id!r} of worker "
            f"{status.worker_id!r}: ids must be uint32 (status id uint64)"
        ) from None
    return [_header(Kind.BP_STATUS, sender, seq), body + tasks]


def encode_control(sender: int, seq: int, payload: dict) -> list[Frame]:
    return [_header(Kind.CONTROL, sender, seq), _json(Kind.CONTROL, payload)]


def decode(frames: Sequence[Any]) -> Message:
    """Decode one multipart message; raises `FrameError` and nothing else on bad input.

    Frames may be bytes or any buffer (memoryview, `zmq.Frame`). Only decode TUPLES
    from authenticated peers: their body is a pickle.
    """
    try:
        count = len(frames)
        size = len(frames[0]) if count else 0
        fields = HEADER.unpack_from(frames[0]) if size == HEADER.size else None
    except (TypeError, struct.error) as e:
        raise FrameError(f"frame 0: unreadable header: {type(e).__name__}: {e}") from None
    if fields is None:
        if not count:
            raise FrameError("empty message: no frames")
        why = "header too long" if size > HEADER.size else "truncated header"
        raise FrameError(f"frame 0: {why}: {size} bytes, expected {HEADER.size}")
    magic, version, kind, sender, seq = fields
    if magic != MAGIC:
        raise FrameError(f"frame 0: bad magic {magic!r}, expected {MAGIC!r}")
    if version != VERSION:
        raise FrameError(f"frame 0: unsupported version {version} (this build speaks {VERSION})")
    if kind == _PIECES:
        whole = _joined(frames)
        if len(whole[0]) == HEADER.size and HEADER.unpack_from(whole[0])[2] == Kind.PIECES:
            raise FrameError("PIECES: a PIECES message inside another")
        return decode(whole)
    try:
        kind, expected, body_decoder = _DECODERS[kind]
    except KeyError:
        raise FrameError(f"frame 0: unknown kind {kind}") from None
    if count != expected and not (expected == -1 and count >= 2):
        want = "at least 2" if expected == -1 else str(expected)
        raise FrameError(f"wrong frame count for {kind.name}: {count}, expected {want}")
    try:
        body = body_decoder(kind, sender, frames)
    except FrameError:
        raise
    except Exception as e:  # a corrupt pickle can raise almost anything
        raise _fail(kind, f"{type(e).__name__}: {e}") from None
    return Message(kind, sender, seq, body)


def _fail(kind: Kind, why: str) -> FrameError:
    return FrameError(f"frame 1: undecodable {kind.name} body: {why}")


class _Unpickler(pickle.Unpickler):
    """Rebuilds the large `bytes` of `_OobBytesPickler`: a buffer, or the index of one."""

    def __init__(self, file: IO[bytes], buffers: Iterable[Any]) -> None:
        super().__init__(file, buffers=buffers)
        self._loaded: list[bytes | bytearray] = []

    def persistent_load(self, pid: Any) -> bytes | bytearray:
        if type(pid) is int and 0 <= pid < len(self._loaded):
            return self._loaded[pid]
        if type(pid) is tuple and len(pid) == 2 and pid[0] == "a":
            try:
                array = bytearray(memoryview(pid[1]))
            except TypeError:
                raise pickle.UnpicklingError("bad persistent id for a bytearray") from None
            self._loaded.append(array)
            return array
        try:
            view = memoryview(pid)
        except TypeError:
            raise pickle.UnpicklingError(f"bad persistent id {pid!r:.40}") from None
        if type(view.obj) is bytes and view.nbytes == len(view.obj) and view.contiguous:
            value = view.obj  # the frame already is a bytes: no copy
        else:
            value = view.tobytes()
        self._loaded.append(value)
        return value


def _decode_tuples(kind: Kind, _sender: int, frames: Sequence[Any]) -> list[WireBatch]:
    return _load_tuples(kind, frames[1], frames[2:])


def load_tuples(data: Any, buffers: Sequence[Any], kind: Kind = Kind.SHM_TUPLES) -> list[WireBatch]:
    """The batches of an SHM_TUPLES message, its pickle loaded with `buffers` (views of
    the segments), or of a BULK_TUPLES one (its opened buffers); raises `FrameError` and
    nothing else."""
    try:
        return _load_tuples(kind, data, buffers)
    except FrameError:
        raise
    except Exception as e:  # a corrupt pickle can raise almost anything
        raise _fail(kind, f"{type(e).__name__}: {e}") from None


def _load_tuples(kind: Kind, data: Any, frames: Sequence[Any]) -> list[WireBatch]:
    if not frames:
        payload = pickle.loads(data)
    else:
        buffers = iter(frames)
        payload = _Unpickler(io.BytesIO(data), buffers=buffers).load()
        if next(buffers, None) is not None:
            raise FrameError(
                f"wrong frame count for {kind.name}: {len(frames) + 2}, the pickle in "
                "frame 1 left out-of-band frames unused"
            )
    if type(payload) is not list:
        raise _fail(kind, f"a list of batches expected, got {type(payload).__name__}")
    for i, batch in enumerate(payload):
        if type(batch) is tuple and len(batch) == 6 and _is_packed(batch):
            dest, src, stream, data, metas, n = batch
            payload[i] = (dest, src, stream, Packed(data, n), metas)
        elif not _is_batch(batch):
            raise _fail(kind, f"batch {i} is not (dest, src, stream, values, metas_or_None)")
    return payload


def _is_packed(batch: tuple) -> bool:
    """(dest, src, stream, pickled or typed rows, metas (None, a list, or typed bytes:
    checked when unpacked), row count): `Packed` rows."""
    dest, src, stream, data, metas, n = batch
    return (
        _addressed(dest, src, stream)
        and type(data) is bytes
        and type(n) is int
        and n >= 0
        and (metas is None or type(metas) is bytes or (type(metas) is list and len(metas) == n))
    )


def _addressed(dest: Any, src: Any, stream: Any) -> bool:
    """A batch's head, rows packed or not: destination and source tasks, its stream."""
    return type(dest) is int and type(src) is int and type(stream) is str


def _is_batch(batch: Any) -> bool:
    if type(batch) is not tuple or len(batch) != 5:
        return False
    dest, src, stream, values, metas = batch
    return (
        _addressed(dest, src, stream)
        and (
            type(values) is list
            or (type(values) is StampedRows and type(values.born) is float)  # an edge with an age
            or (type(values) is RejectedRows and type(values.withheld) is int)  # a fan-out's
        )
        and (metas is None or (type(metas) is list and len(metas) == len(values)))
    )


def _decode_shm(kind: Kind, _sender: int, frames: Sequence[Any]) -> ShmTuples:
    refs = frames[2]
    size = len(refs)
    if size < _SHM_TUPLES.size:
        raise _fail(kind, f"references: {size} bytes, at least {_SHM_TUPLES.size}")
    (tuples,) = _SHM_TUPLES.unpack_from(refs, size - _SHM_TUPLES.size)
    return ShmTuples(frames[1], refs[: size - _SHM_TUPLES.size], tuples)


def _decode_bulk(kind: Kind, _sender: int, frames: Sequence[Any]) -> BulkTuples:
    refs = frames[2]
    if len(refs) != _BULK_REFS.size:
        raise _fail(kind, f"buffer counters: {len(refs)} bytes, expected {_BULK_REFS.size}")
    first, count, tuples = _BULK_REFS.unpack_from(refs)
    if count == 0:
        raise _fail(kind, "no sealed buffers named")
    return BulkTuples(frames[1], first, count, tuples)


def _decode_release(
    kind: Kind, _sender: int, frames: Sequence[Any]
) -> tuple[bytes, tuple[int, ...]]:
    """(pool token, segments)."""
    body = frames[1]
    size = len(body)
    if size < 8:
        raise _fail(kind, f"truncated: {size} bytes")
    (count,) = struct.unpack_from("!I", body, 4)
    if size != 8 + 4 * count:
        raise _fail(kind, f"{size} bytes, expected {8 + 4 * count} for {count} segments")
    return bytes(body[:4]), struct.unpack_from(f"!{count}I", body, 8)


def _decode_status(kind: Kind, sender: int, frames: Sequence[Any]) -> BackpressureStatus:
    body = frames[1]
    size = len(body)
    if size < _STATUS.size:
        raise _fail(kind, f"truncated: {size} bytes, at least {_STATUS.size}")
    worker, status_id, n_bp, n_free = _STATUS.unpack_from(body)
    expected = _STATUS.size + 4 * (n_bp + n_free)
    if size != expected:
        raise _fail(kind, f"{size} bytes, expected {expected} for {n_bp}+{n_free} tasks")
    if worker != sender:
        raise _fail(kind, f"status of worker {worker} sent by worker {sender}")
    tasks = struct.unpack_from(f"!{n_bp + n_free}I", body, _STATUS.size)
    bp, free = frozenset(tasks[:n_bp]), frozenset(tasks[n_bp:])
    if len(bp | free) != len(tasks):
        raise _fail(kind, "a task id is listed twice")
    return BackpressureStatus(worker, status_id, bp, free)


def _decode_json(kind: Kind, _sender: int, frames: Sequence[Any]) -> dict:
    raw = frames[1]
    try:
        value = json.loads(raw if type(raw) is bytes else bytes(raw))
    except (ValueError, TypeError, RecursionError) as e:
        raise _fail(kind, f"not JSON: {type(e).__name__}: {e}") from None
    if type(value) is not dict:
        raise _fail(kind, f"a JSON object expected, got {type(value).__name__}")
    return value


def _decode_hello(kind: Kind, sender: int, frames: Sequence[Any]) -> Hello:
    value = _decode_json(kind, sender, frames)
    topology_id, info = value.get("topology_id"), value.get("worker_port_info")
    if set(value) != {"topology_id", "worker_port_info"} or type(topology_id) is not str:
        raise _fail(kind, "expected keys topology_id (str) and worker_port_info")
    if type(info) is not dict:
        raise _fail(kind, f"worker_port_info must be an object, got {type(info).__name__}")
    return Hello(topology_id, info)


# kind number -> (kind, frame count with -1 meaning "2 or more", body decoder)
_DECODERS: dict[int, tuple[Kind, int, Callable[[Kind, int, Sequence[Any]], Any]]] = {
    k: (k, n, fn)
    for k, n, fn in [
        (Kind.HELLO, 2, _decode_hello),
        (Kind.TUPLES, -1, _decode_tuples),
        (Kind.BP_STATUS, 2, _decode_status),
        (Kind.CONTROL, 2, _decode_json),
        (Kind.SHM_TUPLES, 3, _decode_shm),
        (Kind.SHM_RELEASE, 2, _decode_release),
        (Kind.BULK_TUPLES, 3, _decode_bulk),
    ]
}
