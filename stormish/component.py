"""The author's base classes: Spout, Bolt and BasicBolt.

A component is plain Python that a user subclasses; it is pickled (cloudpickle) and
copied once per task. The collector methods (`emit`, `ack`, ...) are bound on the task's
copy by the runtime when it starts, as instance attributes, so a call from user code
reaches the runtime in one step: the per-tuple path pays for no indirection.
This module imports nothing from the runtime on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .tuple import Tuple, TupleBatch

DEFAULT_STREAM = "default"


def _not_running(name: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{type(self).__name__}.{name}() called outside a running topology: "
            "emit, ack and friends work from open/prepare onward"
        )

    method.__name__ = name
    return method


class Component:
    """Declares output streams. `outputs` is the default stream's fields; `streams` maps
    stream names to fields and wins when both are given."""

    outputs: Any = None  # fields of the default stream (a list, a Schema, a dataclass)
    streams: Mapping[str, Any] | None = None
    component_config: Mapping[str, Any] | None = None

    def declared_streams(self) -> dict[str, tuple[str, ...]]:
        """Each stream's field names. A stream may be declared as a list of fields, a
        `stormish.Schema` or a dataclass type (typed: checked in debug mode)."""
        from .schema import field_names

        return {k: field_names(v) for k, v in self._stream_specs().items()}

    def declared_schemas(self) -> dict[str, Any]:
        """The typed streams' Schemas (stormish.schema)."""
        from .schema import as_schema

        out = {}
        for k, v in self._stream_specs().items():
            s = as_schema(v)
            if s is not None:
                out[k] = s
        return out

    def _stream_specs(self) -> dict[str, Any]:
        if self.streams is not None:
            return {str(k): v for k, v in self.streams.items()}
        if isinstance(self.outputs, Mapping):  # outputs = {"default": Schema(...)}
            return {str(k): v for k, v in self.outputs.items()}
        if self.outputs is not None:
            return {DEFAULT_STREAM: self.outputs}
        return {}

    emit: Callable[..., Any] = _not_running("emit")
    emit_many: Callable[..., Any] = _not_running("emit_many")
    emit_direct: Callable[..., Any] = _not_running("emit_direct")
    # Storm's emit returning the task ids the tuple went to (slower than emit)
    emit_tasks: Callable[..., Any] = _not_running("emit_tasks")
    report_error: Callable[..., Any] = _not_running("report_error")


class Spout(Component):
    """A source. `next_tuple` may emit zero or more tuples and must not block."""

    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        pass

    def next_tuple(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define next_tuple()")

    def ack(self, msg_id: Any) -> None:
        pass

    def fail(self, msg_id: Any, failure: Any = None) -> None:
        """A tree failed (a bolt failed a tuple of it, or it timed out). Define
        `fail(self, msg_id, failure)` to learn why (a `stormish.Failure`) and whether it is
        final (`failure.dead_letter`, with `topology.max.replays`): a final one must not
        be replayed. `fail(self, msg_id)` works as in Storm."""

    def timeout_reset(self, msg_id: Any) -> None:
        """A bolt called `reset_timeout` on a tuple of this message's tree (its timeout
        starts again). A source with a deadline of its own extends it here (JetStream's
        in_progress); Storm has no such callback."""

    def activate(self) -> None:
        pass

    def deactivate(self) -> None:
        pass

    def close(self) -> None:
        pass

    # A finite spout: `finish()` once every tree completed (nothing more to emit or
    # replay: the run may complete); `finish_input()` as soon as every new tuple was
    # emitted while failed ones may still be replayed. At the end of input, windows
    # close (time goes to its end), so their tuples are acked and the run completes.
    finish: Callable[..., Any] = _not_running("finish")
    finish_input: Callable[..., Any] = _not_running("finish_input")
    # dead_letter(msg_id, values, error=None, failures=1, stream="default"): a spout that
    # gives a record up by its own rule (KafkaSpout's retry limit) sends it to its
    # `__dead_letter` stream and counts it in `dead_lettered`, as the engine does past
    # topology.max.replays
    dead_letter: Callable[..., Any] = _not_running("dead_letter")
    # previous_tick edges (docs/edges.md): what was published to them so far becomes
    # visible to their readers, in every worker (beside topology.epoch.millis)
    advance_epoch: Callable[..., Any] = _not_running("advance_epoch")

    # -- sources with offsets (a Kafka partition, a file position): stormish.offsets
    def track_offset(self, offset: int, partition: Any = 0) -> None:
        """Note an offset as emitted (call it with the emit whose msg_id names it); the
        first one tracked in a partition is where its committed position starts."""
        self._offset_tracker(partition, offset).track(offset)

    def ack_offset(self, offset: int, partition: Any = 0) -> int | None:
        """Its tree completed (call it from `ack`): the new committed position of the
        partition when it moved (every offset below it is complete), else None. An
        offset still in flight holds every later one back, however many finished."""
        return self._offset_tracker(partition, offset).complete(offset)

    def committed_offset(self, partition: Any = 0) -> int:
        """Where a restart of the partition must read from."""
        return self._offset_tracker(partition, 0).committed

    def _offset_tracker(self, partition: Any, first: int) -> Any:
        from .offsets import OffsetTracker

        trackers = self.__dict__.setdefault("_offset_trackers", {})
        t = trackers.get(partition)
        if t is None:
            t = trackers[partition] = OffsetTracker(first)
        return t


def prepare_bolt(bolt: Any, conf: Mapping[str, Any], context: Any) -> None:
    """The engine's set-up of a base class (a windowed bolt's windows and watermarks) and
    then the user's `prepare`: a subclass that overrides `prepare` needs no
    `super().prepare(...)`, as in Storm, where no user method must call its base for the
    engine to work. A base class puts its set-up in `_engine_prepare(conf, context)`."""
    setup = getattr(bolt, "_engine_prepare", None)
    if setup is not None:
        setup(conf, context)
    bolt.prepare(conf, context)


def bolt_hook(obj: Any, name: str) -> Callable[..., Any] | None:
    """`obj`'s hook `name` (`Bolt.on_turn`, `Bolt.holds_work`) where its class overrides
    Bolt's, else None: the executor calls only hooks a bolt defines. A shell that runs a
    bolt for the engine (stormish.state's checkpoint shells) names it by `_engine_runs()`
    and answers with that bolt's hooks: looking on the shell's class found Bolt's, and
    a bolt that settles from `on_turn` never did once it fed a stateful bolt."""
    runs = getattr(type(obj), "_engine_runs", None)
    if runs is not None:
        obj = runs(obj)
    default = getattr(Bolt, name)
    return None if getattr(type(obj), name, default) is default else getattr(obj, name)


class Bolt(Component):
    """A processor with manual anchoring and acking.

    Batch settle (stormish.settle): set `batch_size` (and optionally
    `batch_max_wait_ms`) and `execute_batch` gets batches the runtime forms, one lane's
    or one upstream stream's tuples in order, and returns one `Result` per tuple."""

    batch_size: int | None = None
    batch_max_wait_ms: float | None = None

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        pass

    def execute(self, tup: Tuple) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define execute(tup)")

    def execute_batch(self, batch: TupleBatch) -> None:
        """Override to process a whole received batch in one call (batch.values is the
        list of value rows): the per-tuple call and Tuple object are then not paid. The
        runtime calls it instead of `execute` only when a subclass overrides it. A
        BasicBolt's batch is acked when this returns and failed when it raises; a Bolt
        acks or fails the tuples it gets by iterating the batch."""
        for tup in batch:
            self.execute(tup)

    def cleanup(self) -> None:
        pass

    def on_turn(self) -> bool:
        """Work that completes outside `execute`, and a way to stop taking input.

        Define it in a bolt that hands tuples to a client with its own queue and
        callbacks (a Kafka producer: stormish.kafka.KafkaSink). The runtime then calls it
        on the task's thread at the start of every turn of the bolt loop, with or without
        input, so callbacks settle (ack or fail) on the thread that owns the tuples, at
        most one idle wait after they are due. It must not block. Return True while the
        bolt cannot take more input (the client's queue is full): that turn takes none,
        the task counts as under backpressure, and its receive queue fills until the
        engine's backpressure holds its upstream, as for a bolt whose emits cannot go
        out. A bolt that does not define it pays nothing.

        Emit, ack and fail only on the task's thread (in `execute`, `execute_batch` and
        here): the collector is not thread-safe, and what another thread emits waits in
        an outbox only the task's thread sends. A thread of your own hands its results
        to `on_turn` (a queue) and wakes the task with `context.wake()`. A finite run
        knows of such work only through the trees it holds (acking on) or through
        `holds_work`: define it too when the bolt emits from here with acking off."""
        return False

    def holds_work(self) -> bool:
        """True while the bolt owes output it will emit later, from `on_turn` (a thread
        of its own still running tuples `execute` handed it).

        A finite run ends once every spout is done and nothing is queued, in flight or
        running; with acking off nothing else tells it of work a bolt finishes outside
        `execute`, and what `on_turn` emitted after the end was lost. The runtime asks
        on the task's thread, after each `on_turn` (so only a bolt that defines
        `on_turn` is asked), and the run is not over while the last answer was True.
        Keep it cheap (a counter); it must not block."""
        return False

    ack: Callable[..., Any] = _not_running("ack")
    fail: Callable[..., Any] = _not_running("fail")
    ack_batch: Callable[..., Any] = _not_running("ack_batch")
    fail_batch: Callable[..., Any] = _not_running("fail_batch")
    reset_timeout: Callable[..., Any] = _not_running("reset_timeout")


class BasicBolt(Bolt):
    """Anchors each emit to the tuple being executed, acks it when `execute` returns and
    fails it when `execute` raises: the common case, with no acking code to get wrong."""
