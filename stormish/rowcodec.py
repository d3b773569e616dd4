"""Typed rows: a batch of flat rows (exact tuples of str, int in 64 bits, float, bytes,
bool, None) as one buffer, for rows that cross to another worker.

Why not pickle: a 2-worker word count moves half its words between the workers, and
pickle spent ~75 ns writing and ~85 ns reading each 1-word row, most of it in its opcode
machinery; a row of plain values needs none of it (compiled: ~20 and ~35 ns). The
compiled codec is `stormish._speedups` (optional: built where a C compiler is found);
this module is its pure-Python twin and the reference for the layout. Without the
compiled part a worker sends pickles (this twin writes slower than pickle) but still
reads typed rows, so a cluster may mix hosts with and without it.

Layout: b"R", version 1, arity (u8), row count (u32 LE), then every value as a tag
byte and its payload: 0 None, 1 False, 2 True, 3 int (i64 LE), 4 float (f64 LE),
5 str (u8 length, UTF-8), 6 str (u32 length), 7 bytes (u8 length), 8 bytes (u32
length)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

MAGIC = b"R"
HEAD = struct.Struct("<cBBI")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_U32 = struct.Struct("<I")
_MIN_I64, _MAX_I64 = -(2**63), 2**63 - 1

_compiled: Any
try:
    from . import _speedups as _compiled
except ImportError:  # no C compiler where it was installed: the pure-Python paths
    _compiled = None

COMPILED = _compiled is not None


def _put(out: bytearray, v: Any) -> bool:
    t = type(v)
    if t is str:
        try:
            data = v.encode()
        except UnicodeEncodeError:  # a lone surrogate: pickle keeps it
            return False
        n = len(data)
        if n < 256:
            out += bytes((5, n))
        else:
            out += b"\x06" + _U32.pack(n)
        out += data
    elif t is int:
        if not _MIN_I64 <= v <= _MAX_I64:
            return False
        out += b"\x03" + _I64.pack(v)
    elif t is float:
        out += b"\x04" + _F64.pack(v)
    elif t is bytes:
        n = len(v)
        out += bytes((7, n)) if n < 256 else b"\x08" + _U32.pack(n)
        out += v
    elif v is None:
        out += b"\x00"
    elif v is False:
        out += b"\x01"
    elif v is True:
        out += b"\x02"
    else:
        return False
    return True


def py_pack_rows(rows: list) -> bytes | None:
    """The rows in the typed layout, or None when one is not a plain row (pickle it)."""
    if type(rows) is not list or not rows or type(rows[0]) is not tuple:
        return None
    arity = len(rows[0])
    if not 1 <= arity <= 255 or len(rows) > 0xFFFFFFFF:
        return None
    out = bytearray(HEAD.pack(MAGIC, 1, arity, len(rows)))
    for row in rows:
        if type(row) is not tuple or len(row) != arity:
            return None
        for v in row:
            if not _put(out, v):
                return None
    return bytes(out)


def py_unpack_rows(data: Any, n: int) -> list[tuple]:
    """The `n` rows of a typed buffer; anything malformed raises ValueError."""
    data = memoryview(data).cast("B")
    size = len(data)
    if size < HEAD.size or data[0] != 0x52 or data[1] != 1:
        raise ValueError("typed rows: bad header at byte 0")
    arity, count = data[2], _U32.unpack_from(data, 3)[0]
    if arity < 1 or count != n:
        raise ValueError("typed rows: wrong arity or row count at byte 2")
    if count > (size - HEAD.size) // arity:
        raise ValueError("typed rows: more rows than bytes at byte 3")
    at, rows = HEAD.size, []
    for _ in range(count):
        row: list[Any] = []
        for _ in range(arity):
            if at >= size:
                raise ValueError(f"typed rows: truncated at byte {at}")
            tag = data[at]
            at += 1
            if tag == 0:
                row.append(None)
            elif tag in (1, 2):
                row.append(tag == 2)
            elif tag in (3, 4):
                if size - at < 8:
                    raise ValueError(f"typed rows: truncated number at byte {at}")
                row.append((_I64 if tag == 3 else _F64).unpack_from(data, at)[0])
                at += 8
            elif 5 <= tag <= 8:
                if tag in (5, 7):
                    if size - at < 1:
                        raise ValueError(f"typed rows: truncated length at byte {at}")
                    length = data[at]
                    at += 1
                else:
                    if size - at < 4:
                        raise ValueError(f"typed rows: truncated length at byte {at}")
                    length = _U32.unpack_from(data, at)[0]
                    at += 4
                if size - at < length:
                    raise ValueError(f"typed rows: truncated value at byte {at}")
                raw = bytes(data[at : at + length])
                if tag <= 6:
                    try:
                        row.append(raw.decode())
                    except UnicodeDecodeError:
                        raise ValueError(f"typed rows: invalid UTF-8 at byte {at}") from None
                else:
                    row.append(raw)
                at += length
            else:
                raise ValueError(f"typed rows: unknown tag at byte {at - 1}")
        rows.append(tuple(row))
    if at != size:
        raise ValueError(f"typed rows: trailing bytes at byte {at}")
    return rows


METAS = b"M"
_METAS_HEAD = struct.Struct("<cBI")
_PAIR = struct.Struct("<qq")
_NONE_META = 0xFF


def py_pack_metas(metas: list) -> bytes | None:
    """A tracked batch's metas (per row None, or a tuple of (root, edge) int pairs) in
    the typed layout: b"M", version 1, count (u32 LE), then per row a count byte (0xFF
    None) and its pairs as two i64 LE; None when one is anything else (pickle it)."""
    if type(metas) is not list or not metas or len(metas) > 0xFFFFFFFF:
        return None
    out = bytearray(_METAS_HEAD.pack(METAS, 1, len(metas)))
    for m in metas:
        if m is None:
            out.append(_NONE_META)
            continue
        if type(m) is not tuple or len(m) > 253:
            return None
        out.append(len(m))
        for pair in m:
            if type(pair) is not tuple or len(pair) != 2:
                return None
            a, b = pair
            if type(a) is not int or type(b) is not int:
                return None
            if not (_MIN_I64 <= a <= _MAX_I64 and _MIN_I64 <= b <= _MAX_I64):
                return None
            out += _PAIR.pack(a, b)
    return bytes(out)


def py_unpack_metas(data: Any, n: int) -> list:
    """The `n` metas of a typed buffer; anything malformed raises ValueError."""
    data = memoryview(data).cast("B")
    size = len(data)
    if size < _METAS_HEAD.size or data[0] != 0x4D or data[1] != 1:
        raise ValueError("typed rows: bad metas header at byte 0")
    count = _U32.unpack_from(data, 2)[0]
    if count != n:
        raise ValueError("typed rows: wrong metas count at byte 2")
    if count > size - _METAS_HEAD.size:
        raise ValueError("typed rows: more metas than bytes at byte 2")
    at = _METAS_HEAD.size
    out: list[Any] = []
    for _ in range(count):
        if at >= size:
            raise ValueError(f"typed rows: truncated metas at byte {at}")
        k = data[at]
        at += 1
        if k == _NONE_META:
            out.append(None)
            continue
        if k == 0xFE or size - at < 16 * k:
            why = "bad metas count" if k == 0xFE else "truncated metas"
            raise ValueError(f"typed rows: {why} at byte {at - 1}")
        out.append(tuple(_PAIR.unpack_from(data, at + 16 * j) for j in range(k)))
        at += 16 * k
    if at != size:
        raise ValueError(f"typed rows: trailing metas bytes at byte {at}")
    return out


def py_route_str(rows: list, fidx: int, outboxes: tuple, start: int) -> int:
    """Rows from `start` appended to `outboxes[crc32(key in UTF-8) % len(outboxes)]`
    (the fields grouping's stable hash) up to the first that is not a tuple or list long
    enough or whose key is not exactly a str that encodes: its index."""
    for i in range(start, len(rows)):
        v = rows[i]
        if type(v) not in (tuple, list) or fidx >= len(v) or type(v[fidx]) is not str:
            return i
        try:
            data = v[fidx].encode()
        except UnicodeEncodeError:
            return i
        outboxes[zlib.crc32(data) % len(outboxes)].append(v)
    return len(rows)


def py_route_keyed(rows: list, fidx: int, cache: dict, start: int) -> int:
    """Rows from `start` appended to their outbox `cache[row[fidx]]`, up to the first
    that is not a tuple or list long enough, whose key is unhashable or not cached, or
    whose outbox is not a list: its index (len(rows) when all were placed)."""
    for i in range(start, len(rows)):
        v = rows[i]
        if type(v) not in (tuple, list) or fidx >= len(v):
            return i
        try:
            ob = cache[v[fidx]]
        except (KeyError, TypeError):
            return i
        if not isinstance(ob, list):
            return i
        ob.append(v)
    return len(rows)


# What the engine calls: the compiled functions, or None where writing is better left
# to pickle (pack_rows) and the collector's own loop is the fastest Python (route_keyed)
pack_rows: Callable[[list], bytes | None] | None = None
unpack_rows: Callable[[Any, int], list] = py_unpack_rows
route_keyed: Callable[[list, int, dict, int], int] | None = None
route_str: Callable[[list, int, tuple, int], int] | None = None
# a one-stream component's emit (runtime/emitters.py), compiled: Emitter(py closure, ...)
Emitter: Callable[..., Callable[..., None]] | None = None
pack_metas: Callable[[list], bytes | None] | None = None
unpack_metas: Callable[[Any, int], list] = py_unpack_metas
if _compiled is not None:
    Emitter = _compiled.Emitter
    pack_metas = _compiled.pack_metas
    unpack_metas = _compiled.unpack_metas
    route_str = _compiled.route_str
    pack_rows = _compiled.pack_rows
    unpack_rows = _compiled.unpack_rows
    route_keyed = _compiled.route_keyed
