"""The tuple a bolt receives.

A tuple's values are a Python tuple (or list) shared, not copied, inside a worker: read
them as immutable. Everything else a tuple knows (source component, task, stream and the
field names) is one `Source` record shared by every tuple of a batch, so making a tuple
costs one small object per value row: the per-tuple hot path allocates nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

TICK_STREAM = "__tick"
# The value of the last tick a windowed bolt gets: every spout has finished and nothing
# moves (a finite run), so time goes to its end and every window closes.
END_OF_INPUT = "end_of_input"
SYSTEM_COMPONENT = "__system"
# Every spout's dead letters: trees that failed `topology.max.replays` times.
DEAD_LETTER_STREAM = "__dead_letter"
DEAD_LETTER_FIELDS = ("msg_id", "stream", "values", "component", "error", "failures")


class Traced(tuple):
    """Values with invocation metadata: `correlation_id` (the conversation: an order, a
    request) and `causation_id` (what caused it), carried by the tuple itself, so they
    travel wherever its values go (across workers, in replays, in dead letters) and a
    tuple without them costs nothing. An emit anchored to a traced tuple inherits its
    ids unless its values are traced already (`stormish.traced`). They are never metric
    labels: each id would be a time series of its own."""

    correlation_id: Any
    causation_id: Any

    def __new__(
        cls, values: Sequence[Any], correlation_id: Any = None, causation_id: Any = None
    ) -> Traced:
        t = super().__new__(cls, values)
        t.correlation_id = correlation_id
        t.causation_id = causation_id
        return t

    def __reduce__(self) -> Any:
        return (Traced, (tuple(self), self.correlation_id, self.causation_id))

    def __repr__(self) -> str:
        return f"traced({tuple(self)!r}, correlation_id={self.correlation_id!r})"


def traced(values: Sequence[Any], correlation_id: Any = None, causation_id: Any = None) -> Traced:
    """`values` to emit with a correlation id and a causation id: `self.emit(traced([order,
    qty], correlation_id=order))`. Read them downstream as `tup.correlation_id`."""
    return Traced(values, correlation_id, causation_id)


def inherit(values: Sequence[Any], anchor_values: Any) -> Sequence[Any]:
    """`values` with the ids of the anchor's values, unless it has its own (or the anchor
    none)."""
    if anchor_values.__class__ is not Traced or values.__class__ is Traced:
        return values
    return Traced(values, anchor_values.correlation_id, anchor_values.causation_id)


class Source:
    """Where a batch of tuples came from; one per (source task, stream) per receiver."""

    __slots__ = ("component", "task", "stream", "fields", "index", "lookup", "late", "_late_twin")

    def __init__(self, component: str, task: int, stream: str, fields: Sequence[str]):
        self.component = component
        self.task = task
        self.stream = stream
        self.fields = tuple(fields)
        self.index = {f: i for i, f in enumerate(self.fields)}
        # what `Tuple[key]` looks up: each field name and each position (negative ones
        # too) to its position, so a field name and an int cost one dict lookup alike
        n = len(self.fields)
        self.lookup: dict[Any, int] = {**{i - n: i for i in range(n)}, **{i: i for i in range(n)}}
        self.lookup.update(self.index)
        self.late = False  # tuples past their edge's deadline_ms (deadline_missed)
        self._late_twin: Source | None = None

    def late_twin(self) -> Source:
        """The same source, for tuples that missed their edge's deadline: a tuple says it
        through its source, so an on-time tuple costs nothing more."""
        twin = self._late_twin
        if twin is None:
            twin = self._late_twin = Source(self.component, self.task, self.stream, self.fields)
            twin.late = True
        return twin


class _FromSource:
    """Read-only views of the batch's Source, shared by Tuple and TupleBatch."""

    __slots__ = ()
    source: Source

    @property
    def fields(self) -> tuple[str, ...]:
        return self.source.fields

    @property
    def stream(self) -> str:
        return self.source.stream

    @property
    def source_component(self) -> str:
        return self.source.component

    @property
    def deadline_missed(self) -> bool:
        """Older than its edge's `deadline_ms` when it was delivered (still executed)."""
        return self.source.late

    @property
    def source_task(self) -> int:
        return self.source.task


class Tuple(_FromSource):
    """One tuple as a bolt sees it. An untracked tuple (acking off, or not anchored)
    has two slots only; `meta` and `ack_val` are class defaults it never writes."""

    __slots__ = ("values", "source")
    meta: Any = None
    ack_val = 0

    def __init__(self, values: Sequence[Any], source: Source):
        self.values = values
        self.source = source

    def __getitem__(self, field: str | int) -> Any:
        """The value of a field name, or at a position (an int)."""
        try:
            return self.values[self.source.lookup[field]]
        except KeyError:
            pass
        if isinstance(field, int):  # past the declared fields: the values say
            return self.values[field]
        raise KeyError(
            f"stream {self.source.stream!r} of {self.source.component!r} has no field "
            f"{field!r}; its fields are {list(self.source.fields)}"
        ) from None

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def get(self, field: str, default: Any = None) -> Any:
        i = self.source.index.get(field)
        return default if i is None else self.values[i]

    @property
    def correlation_id(self) -> Any:
        """The id its emitter gave it (`stormish.traced`) or inherited from its anchors;
        None when it has none."""
        return getattr(self.values, "correlation_id", None)

    @property
    def causation_id(self) -> Any:
        return getattr(self.values, "causation_id", None)

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(self.source.fields, self.values, strict=False))

    @property
    def is_tick(self) -> bool:
        """True for a tick tuple (`topology.tick.tuple.freq.secs`), as Storm's
        `TupleUtils.isTick`. A property, so `if tup.is_tick:` reads right; the call
        `tup.is_tick()` raises TypeError (a bool is not callable, and the error report
        says why) instead of a bound method that is always true."""
        return self.source.stream == TICK_STREAM

    def __repr__(self) -> str:
        s = self.source
        return f"Tuple({s.component}:{s.task}/{s.stream} {tuple(self.values)!r})"


class TrackedTuple(Tuple):
    """A tuple in a reliable tree: `meta` is ((root, edge id), ...), or for a tuple a
    spout of this worker sent straight to this BasicBolt its tree's root alone (an int:
    a root meta, runtime/ack_folder.py; `tree_pairs` reads both), and `ack_val` the XOR
    of the edge ids of the tuples anchored to it so far. Engine state, not an API."""

    __slots__ = ("meta", "ack_val")

    def __init__(self, values: Sequence[Any], source: Source, meta: Any):
        self.values = values
        self.source = source
        self.meta = meta
        self.ack_val = 0


class TupleBatch(_FromSource):
    """The tuples of one received batch, for `Bolt.execute_batch`.

    `values` is the list of value rows: reading it costs nothing per tuple. Iterating
    yields `Tuple` objects; with acking on, iterate to anchor: each emit is anchored to
    the tuple the iteration is on (BasicBolt), as `execute` would be.
    """

    __slots__ = ("values", "source", "metas", "_collector", "_made")

    def __init__(self, values: list, source: Source, metas: list | None, collector: Any):
        self.values = values
        self.source = source
        self.metas = metas
        self._collector = collector
        self._made: list[Tuple] = []

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Tuple]:
        source, col = self.source, self._collector
        if self.metas is None:
            for v in self.values:
                t = Tuple(v, source)
                col.current = t
                yield t
        else:
            made = self._made
            made.clear()
            for v, m in zip(self.values, self.metas, strict=True):
                t = TrackedTuple(v, source, m) if m else Tuple(v, source)
                made.append(t)
                col.current = t
                yield t
        col.current = None

    def tracked(self) -> list[Tuple]:
        """The tuples to ack or fail after the batch: those iterated (they carry the ack
        values of the emits anchored to them), then fresh ones for the rest."""
        made = list(self._made)
        metas = self.metas or []
        for v, m in zip(self.values[len(made) :], metas[len(made) :], strict=True):
            made.append(TrackedTuple(v, self.source, m) if m else Tuple(v, self.source))
        return made


class StampedRows(list):
    """A batch's rows and the time its sender published them (the topology clock within
    a worker, the wall clock between workers); `late`: past the edge's deadline."""

    __slots__ = ("born", "late")

    def __init__(self, rows: Any = (), born: float = 0.0):
        super().__init__(rows)
        self.born = born
        self.late = False

    def __reduce__(self) -> tuple:
        return (_stamped, (list(self), self.born))


def _stamped(rows: list, born: float) -> StampedRows:
    return StampedRows(rows, born)


class RejectedRows(list):
    """Rows a sender's fan-out withheld because a `fail` edge in another worker had no
    room for them (runtime/credits.py): sent to that edge's worker to be counted there
    as rejected, never executed; `withheld`: the deliveries to other edges withheld."""

    __slots__ = ("withheld",)

    def __init__(self, rows: Any = (), withheld: int = 0):
        super().__init__(rows)
        self.withheld = withheld

    def __reduce__(self) -> tuple:
        return (_rejected, (list(self), self.withheld))


def _rejected(rows: list, withheld: int) -> RejectedRows:
    return RejectedRows(rows, withheld)
