"""The safe format of control messages: JSON, with the few shapes JSON lacks tagged.

A control message from a peer must never run code when it is read (an unkeyed
nimbus once unpickled a stranger's `list` request and ran it). So every control payload is
JSON, read with `json.loads` and turned back into Python values by a table of known
shapes, never by names the message chooses:

- a tuple is `{"$t": [...]}`, a set or frozenset `{"$s": [...]}` / `{"$f": [...]}`,
  bytes `{"$b": "<base64>"}`, a dict whose keys are not all strings (or that has a key
  starting with `$`) `{"$d": [[k, v], ...]}`;
- a record, one of the frozen dataclasses stormish reports with (task statistics, error
  reports), is `{"$r": "TaskStats", "v": {field: value}}`; only the classes registered
  with `record` are built, each from its declared fields, so a message can make nothing
  but plain data.

Pickles (a topology's code, a task's results) travel in a frame of their own that only
an authenticated peer's message may carry, and only for the verbs that need one
(`transport/control.py`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping
from typing import Any, TypeVar

from ..errors import StormishError

T = TypeVar("T")

_RECORDS: dict[str, type] = {}
_SKIP: dict[str, frozenset[str]] = {}  # fields sent as their default
_EXTRA: dict[str, tuple[str, ...]] = {}  # computed attributes sent and set back


class WireError(StormishError):
    """A payload that is not in the safe format, or holds a shape it does not know."""


def record(cls: type[T], skip: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> type[T]:
    """Register a dataclass whose instances may cross a control channel. `skip`: fields
    left at their default (a live object the other side cannot use); `extra`: computed
    attributes (a cached property) sent as text and set back on the copy."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    _RECORDS[cls.__name__] = cls
    _SKIP[cls.__name__] = frozenset(skip)
    _EXTRA[cls.__name__] = tuple(extra)
    return cls


def dumps(value: Any) -> bytes:
    try:
        return json.dumps(_enc(value), separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise WireError(f"cannot send {type(value).__name__} as a control payload: {exc}") from exc


def loads(data: bytes) -> Any:
    try:
        return json.loads(data, object_hook=_dec)
    except WireError:
        raise
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise WireError(f"not a control payload ({len(data)} bytes): {exc}") from None


def _enc(v: Any) -> Any:
    if v is None or isinstance(v, str | bool | int | float):
        return v
    if isinstance(v, list):
        return [_enc(x) for x in v]
    if isinstance(v, tuple):
        return {"$t": [_enc(x) for x in v]}
    if isinstance(v, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in v):
            return {k: _enc(x) for k, x in v.items()}
        return {"$d": [[_enc(k), _enc(x)] for k, x in v.items()]}
    if isinstance(v, frozenset):
        return {"$f": [_enc(x) for x in v]}
    if isinstance(v, set):
        return {"$s": [_enc(x) for x in v]}
    if isinstance(v, bytes | bytearray | memoryview):
        return {"$b": base64.b64encode(bytes(v)).decode("ascii")}
    name = type(v).__name__
    if _RECORDS.get(name) is type(v):
        skip = _SKIP[name]
        fields = {
            f.name: _enc(getattr(v, f.name))
            for f in dataclasses.fields(v)  # type: ignore[arg-type]
            if f.init and f.name not in skip
        }
        out = {"$r": name, "v": fields}
        if _EXTRA[name]:
            out["x"] = {a: _enc(getattr(v, a)) for a in _EXTRA[name]}
        return out
    if isinstance(v, Mapping):  # a mapping proxy, say: as its plain form
        return _enc(dict(v))
    raise TypeError(f"{name} is not a control payload shape (JSON, or a registered record)")


def _hashable(x: Any) -> Any:
    return tuple(_hashable(i) for i in x) if isinstance(x, list) else x


def _dec(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        ((tag, val),) = obj.items()
        if tag == "$t":
            return tuple(val)
        if tag == "$d":
            return {_hashable(k): x for k, x in val}
        if tag == "$f":
            return frozenset(val)
        if tag == "$s":
            return set(val)
        if tag == "$b":
            return base64.b64decode(val, validate=True)
    if "$r" in obj and "v" in obj and set(obj) <= {"$r", "v", "x"}:
        return _record(obj["$r"], obj["v"], obj.get("x"))
    return obj


def _record(name: Any, values: Any, extra: Any) -> Any:
    cls = _RECORDS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise WireError(f"control payload holds an unknown record {name!r}")
    if not isinstance(values, dict):
        raise WireError(f"record {name}: fields must be an object")
    known = {f.name for f in dataclasses.fields(cls) if f.init} - _SKIP[name]
    unknown = set(values) - known
    if unknown:
        raise WireError(f"record {name}: unknown fields {sorted(unknown)}")
    try:
        obj = cls(**values)
    except TypeError as exc:
        raise WireError(f"record {name}: {exc}") from None
    if extra is not None:
        if not isinstance(extra, dict) or set(extra) - set(_EXTRA[name]):
            raise WireError(f"record {name}: unknown extras")
        obj.__dict__.update(extra)  # cached properties live in the instance's dict
    return obj
