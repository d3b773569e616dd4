"""`JoinBolt`: Storm's windowed join. Streams are joined on a key within each window,
inner or left, in the order they were declared, and the selected fields emitted:

    JoinBolt("users", "userId")                  # the first stream and its key
        .join("orders", "userId", "users")       # inner: orders.userId == users.userId
        .left_join("stores", "storeId", "orders")
        .select("users:userId, name, orders:orderId, city")
        .with_tumbling_window(Duration(seconds=10))

A stream is named by its source component (the default, Storm's Selector.SOURCE) or by
its stream id (`selector="stream"`). A selected field is `field`, `stream:field` or a
nested `a.b.c` (mappings inside a field); the output fields are named as written
(Storm's rule, qualifier included). A field missing from every joined tuple is None
(a left join's unmatched side). Each result is anchored to the tuples it was made of,
not to the whole window (Storm's JoinBolt does the same).

The join itself (`hash_join`) is a pure function of the window's tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import TopologyError
from ..tuple import Tuple
from .bolt import WindowedBolt
from .spec import Window

INNER, LEFT = "inner", "left"


@dataclass(frozen=True)
class FieldSelector:
    """`stream:x.y.z`, `x.y.z` or `:x`: an optional stream and a (nested) field path."""

    stream: str | None
    path: tuple[str, ...]
    name: str  # the output field's name, as written

    @classmethod
    def parse(cls, text: str, stream: str | None = None) -> FieldSelector:
        text = text.strip()
        head, sep, rest = text.partition(":")
        if sep and stream is not None:
            raise TopologyError(
                f"join field {text!r}: no 'stream:' qualifier here, the stream is {stream!r}"
            )
        if sep and head.strip():
            stream, name, field = head.strip(), text, rest.strip()
        else:
            name = field = rest.strip() if sep else text
        if not field or any(not p for p in field.split(".")):
            raise TopologyError(f"join field {text!r} names no field")
        return cls(stream, tuple(field.split(".")), name)

    def lookup(self, tup: Tuple, stream_of: Callable[[Tuple], str]) -> Any:
        """The field's value in `tup`, or None (another stream, or absent)."""
        if self.stream is not None and self.stream != stream_of(tup):
            return None
        value = tup.get(self.path[0])
        for part in self.path[1:]:
            if not isinstance(value, Mapping):
                return None
            value = value.get(part)
        return value


@dataclass(frozen=True)
class JoinStep:
    stream: str
    key: FieldSelector  # in this stream
    kind: str | None = None  # INNER or LEFT; None for the first stream
    prior: FieldSelector | None = None  # the key in an earlier stream it must equal


def _first_value(sel: FieldSelector, tuples: Sequence[Tuple], stream_of: Any) -> Any:
    for t in tuples:
        v = sel.lookup(t, stream_of)
        if v is not None:
            return v
    return None


def hash_join(
    tuples: Sequence[Tuple],
    steps: Sequence[JoinStep],
    selected: Sequence[FieldSelector],
    stream_of: Callable[[Tuple], str],
) -> list[tuple[list[Any], list[Tuple]]]:
    """(output values, the tuples joined into them) for each result, in the first
    stream's order: the first stream probes, each later one is hashed on its key."""
    first = steps[0].stream
    probe = [[t] for t in tuples if stream_of(t) == first]
    for step in steps[1:]:
        table: dict[Any, list[Tuple]] = {}
        for t in tuples:
            if stream_of(t) == step.stream:
                k = _hashable(step.key.lookup(t, stream_of))
                table.setdefault(k, []).append(t)
        joined = []
        for rec in probe:
            k = _first_value(step.prior, rec, stream_of)  # type: ignore[arg-type]
            if k is None:
                continue  # a record without a key joins nothing, even leftwards (Storm)
            matches = table.get(_hashable(k))
            if matches:
                joined += [rec + [m] for m in matches]
            elif step.kind == LEFT:
                joined.append(rec)
        probe = joined
    return [([_first_value(s, rec, stream_of) for s in selected], rec) for rec in probe]


def _hashable(key: Any) -> Any:
    """A key as a dict takes it, equal keys alike: a list (a composite key, `[region,
    id]`) as a tuple, a dict or set by its items, as Java's HashMap takes a List by value
    (Storm's JoinBolt). It failed every window (unhashable type), replayed for good."""
    if isinstance(key, list | tuple):
        return tuple(_hashable(k) for k in key)
    if isinstance(key, dict):
        return ("__dict__", frozenset((k, _hashable(v)) for k, v in key.items()))
    if isinstance(key, set):
        return frozenset(key)
    if isinstance(key, bytearray):
        return bytes(key)
    return key


class JoinBolt(WindowedBolt):
    """Joins its input streams on keys over each window; configure it with the builder
    methods (each returns the bolt) and a window, as any WindowedBolt."""

    def __init__(self, stream: str, key: str, selector: str = "source"):
        if selector not in ("source", "stream"):
            raise TopologyError(f"JoinBolt selector must be 'source' or 'stream', not {selector!r}")
        self.selector = selector
        self.steps: list[JoinStep] = [JoinStep(stream, FieldSelector.parse(key, stream))]
        self.selected: list[FieldSelector] = []
        self.output_stream = "default"

    def join(self, stream: str, key: str, prior: str) -> JoinBolt:
        """Inner join: `stream`'s tuples whose `key` equals the key of `prior` (a
        stream declared before)."""
        return self._add_step(stream, key, prior, INNER)

    def left_join(self, stream: str, key: str, prior: str) -> JoinBolt:
        """Left join: as `join`, and what has no match in `stream` is kept (its
        fields None)."""
        return self._add_step(stream, key, prior, LEFT)

    def _add_step(self, stream: str, key: str, prior: str, kind: str) -> JoinBolt:
        known = {s.stream: s for s in self.steps}
        if stream in known:
            raise TopologyError(f"JoinBolt: {stream!r} is already part of the join")
        if prior not in known:
            raise TopologyError(
                f"JoinBolt: {stream!r} joins {prior!r}, which is not declared before it "
                f"(declared: {list(known)})"
            )
        prior_key = FieldSelector(prior, known[prior].key.path, known[prior].key.name)
        self.steps.append(JoinStep(stream, FieldSelector.parse(key, stream), kind, prior_key))
        return self

    def select(self, fields: str | Sequence[str]) -> JoinBolt:
        """The output fields: "a, s2:b, c.d" or a list of such names."""
        names = fields.split(",") if isinstance(fields, str) else list(fields)
        self.selected = [FieldSelector.parse(n) for n in names]
        out = [s.name for s in self.selected]
        if len(set(out)) != len(out):
            raise TopologyError(f"JoinBolt.select names a field twice: {out}")
        return self

    def with_output_stream(self, stream: str) -> JoinBolt:
        self.output_stream = stream
        return self

    def declared_streams(self) -> dict[str, tuple[str, ...]]:
        streams = super().declared_streams()
        streams[self.output_stream] = tuple(s.name for s in self.selected)
        return streams

    def check_in_topology(
        self,
        name: str,
        conf: Mapping[str, Any],
        inputs: Sequence[tuple[str, str]],
        fields: Mapping[tuple[str, str], Sequence[str]] | None = None,
    ) -> None:
        if not self.selected:
            raise TopologyError(f"JoinBolt {name!r}: call select(...) to name the output fields")
        have = {src if self.selector == "source" else stream for src, stream in inputs}
        missing = [s.stream for s in self.steps if s.stream not in have]
        if missing:
            what = "component" if self.selector == "source" else "stream"
            raise TopologyError(
                f"JoinBolt {name!r} joins {missing}, but subscribes to no such {what} "
                f"(it reads {sorted(have)})"
            )
        if fields:
            self._check_fields(name, fields)
        super().check_in_topology(name, conf, inputs, fields)

    def _check_fields(self, name: str, fields: Mapping[tuple[str, str], Sequence[str]]) -> None:
        """The join keys and the selected fields, against what the joined streams declare
        (a nested path's first part): a misspelt key joined nothing, without a word."""
        joined = {s.stream for s in self.steps}
        declared: dict[str, set[str]] = {}
        for (src, stream), fs in fields.items():
            side = src if self.selector == "source" else stream
            if side in joined:
                declared.setdefault(side, set()).update(fs)
        for step in self.steps:
            if step.key.path[0] not in declared.get(step.stream, set()):
                raise TopologyError(
                    f"JoinBolt {name!r}: join key {step.key.name!r} is not a field of "
                    f"{step.stream!r}, whose fields are {sorted(declared.get(step.stream, ()))}"
                )
        every = set().union(*declared.values()) if declared else set()
        for sel in self.selected:
            have = declared.get(sel.stream, set()) if sel.stream is not None else every
            if sel.path[0] not in have:
                of = repr(sel.stream) if sel.stream is not None else f"any of {sorted(joined)}"
                raise TopologyError(
                    f"JoinBolt {name!r}: selected field {sel.name!r} is not a field of {of} "
                    f"(their fields: { {k: sorted(v) for k, v in sorted(declared.items())} })"
                )

    def _stream_of(self, tup: Tuple) -> str:
        return tup.source_component if self.selector == "source" else tup.stream

    def execute_window(self, window: Window) -> None:
        for values, tuples in hash_join(window.tuples, self.steps, self.selected, self._stream_of):
            self.emit(values, self.output_stream, anchors=tuples)
