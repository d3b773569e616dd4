"""streamparse/pystorm components run in-process: a stormish Bolt or Spout that holds one
instance of the user's class per task and drives it as pystorm's `run()` loop would.

What pystorm would send Storm goes to the task's collector in one call: `emit` (anchors,
stream, direct task, need_task_ids), `ack`, `fail`, `log`, `raise_exception`. A tuple is
pystorm's `Tuple(id, component, stream, task, values)` with `values` the namedtuple of
its stream's fields, as pystorm makes it; its `id` is the stormish tuple itself (opaque,
not Storm's string), which is what `ack`, `fail` and anchors take back."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any, cast

from pystorm.component import Tuple as PTuple

from ..component import BasicBolt, Bolt, Spout
from ..tuple import TICK_STREAM

TICK = "__tick"
_new = tuple.__new__


class PystormBolt(Bolt):
    """A pystorm `Bolt`, `BatchingBolt` or `TicklessBatchingBolt` subclass, in-process."""

    # what a Flux file's properties and configMethods do to each new instance
    setup: Callable[[Any], None] | None = None

    def __init__(
        self,
        cls: type,
        streams: Mapping[str, tuple[str, ...]],
        sources: Mapping[str, Mapping[str, tuple[str, ...]]],
    ):
        self.cls = cls
        self.streams = dict(streams)
        self.sources = {s: dict(ss) for s, ss in sources.items()}
        # a TicklessBatchingBolt's batches run at ticks this often (its timer thread's
        # period): on the task's thread, so no lock against the user's process()
        self.batch_every = getattr(cls, "secs_between_batches", None) if _tickless(cls) else None

    @staticmethod
    def of(
        cls: type,
        streams: Mapping[str, tuple[str, ...]],
        sources: Mapping[str, Mapping[str, tuple[str, ...]]],
    ) -> PystormBolt:
        """The adapter for `cls`: `PystormAutoBolt` for the common bolt that leaves
        anchoring, acking and failing to pystorm (all three `auto_` on, none of `emit`,
        `ack`, `fail` overridden, not batching), else this one."""
        return (PystormAutoBolt if _auto(cls) else PystormBolt)(cls, streams, sources)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.cls.__module__}.{self.cls.__qualname__})"

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        from pystorm.bolt import BatchingBolt, TicklessBatchingBolt

        from . import shim

        sctx = shim.storm_context(
            context, cast(Mapping[str, tuple[str, ...]], self.streams), self.sources
        )
        inst = self.inst = shim.new_instance(self.cls, conf, context, sctx)
        if self.setup is not None:  # Flux's properties and configMethods
            self.setup(inst)
        self._types = shim.value_types(self.sources)
        self._cache: dict[Any, tuple] = {}
        self._tick_secs = conf.get("topology.tick.tuple.freq.secs")
        self.batching = isinstance(inst, BatchingBolt)
        self.tickless = isinstance(inst, TicklessBatchingBolt)
        _bind_bolt(self, inst)
        inst.initialize(inst.storm_conf, sctx)

    def execute(self, tup: Any) -> None:
        info = self._cache.get(tup.source)
        if info is None:
            info = self._source_info(tup.source)
        comp, stream, task, vt = info
        inst = self.inst
        # tuple.__new__ makes the namedtuples without their Python-level __new__: the
        # values were checked against the stream's fields when emitted
        pt = _new(PTuple, (tup, comp, stream, task, _new(vt or tuple, tup.values)))
        inst._current_tups = [pt]
        if stream == TICK_STREAM:
            self._tick(inst, self._tick_tuple(inst, tup))
        elif self.batching:
            inst.process(pt)
        else:
            inst.process(pt)
            if inst.auto_ack:
                inst.ack(pt)
        inst._current_tups = []

    def _tick(self, inst: Any, pt: Any) -> None:
        if not self.batching:
            inst.process_tick(pt)
            if inst.auto_ack:
                inst.ack(pt)
            return
        try:
            inst.process_tick(pt)
            if self.tickless:  # the timer thread's work, on the task's thread
                with inst._batch_lock:
                    inst.process_batches()
        except Exception:
            if inst.auto_fail:  # as pystorm's _handle_run_exception: the batches fail
                for batch in inst._batches.values():
                    for t in batch:
                        inst.fail(t)
                inst._batches = defaultdict(list)
            raise

    def _tick_tuple(self, inst: Any, tup: Any) -> Any:
        """Storm's tick tuple as pystorm reads it: from `__system`, task -1, its values
        the tick frequency in seconds."""
        pt = PTuple(tup, "__system", TICK, -1, (self._tick_secs,))
        inst._current_tups = [pt]
        return pt

    def _source_info(self, source: Any) -> tuple:
        comp, stream = source.component, source.stream
        if stream == TICK_STREAM:
            info = ("__system", TICK, -1, None)
        else:
            info = (comp, stream, source.task, self._types.get((comp, stream)))
        self._cache[source] = info
        return info


class PystormAutoBolt(PystormBolt, BasicBolt):
    """pystorm's auto_anchor, auto_ack and auto_fail are what a stormish BasicBolt does
    (anchor each emit to the input, ack it on return, fail it on an exception): so the
    runtime does them, on its fast path, and the adapter only calls `process`."""

    # what an ack or fail by hand is told (the engine's BasicBolt refusal, in pystorm's
    # words; under Storm the ShellBolt ends the worker on the second ack or fail)
    settles_itself = (
        "pystorm's auto_ack acks the tuple when process() returns and auto_fail fails it "
        "when process() raises; set auto_ack = False (and auto_fail = False) on the class "
        "to ack and fail by hand (Storm's ShellBolt ends the worker: 'Acked a non-existent "
        "or already acked/failed id')"
    )

    def execute(self, tup: Any) -> None:
        info = self._cache.get(tup.source)
        if info is None:
            info = self._source_info(tup.source)
        comp, stream, task, vt = info
        inst = self.inst
        # tuple.__new__ makes the namedtuples without their Python-level __new__: the
        # values were checked against the stream's fields when emitted
        pt = _new(PTuple, (tup, comp, stream, task, _new(vt or tuple, tup.values)))
        inst._current_tups = [pt]
        if stream == TICK_STREAM:
            inst.process_tick(self._tick_tuple(inst, tup))
        else:
            inst.process(pt)
        inst._current_tups = []


def _auto(cls: Any) -> bool:
    import pystorm.bolt as pb

    return (
        cls.auto_ack is True
        and cls.auto_anchor is True
        and cls.auto_fail is True
        and not issubclass(cls, pb.BatchingBolt)
        and cls.emit is pb.Bolt.emit
        and cls.ack is pb.Bolt.ack
        and cls.fail is pb.Bolt.fail
    )


def _tickless(cls: Any) -> bool:
    from pystorm.bolt import TicklessBatchingBolt

    return issubclass(cls, TicklessBatchingBolt)


class PystormSpout(Spout):
    """A pystorm `Spout` or `ReliableSpout` subclass, in-process."""

    setup: Callable[[Any], None] | None = None  # as PystormBolt's

    def __init__(self, cls: type, streams: Mapping[str, tuple[str, ...]]):
        self.cls = cls
        self.streams = dict(streams)

    def __repr__(self) -> str:
        return f"PystormSpout({self.cls.__module__}.{self.cls.__qualname__})"

    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        from . import shim

        sctx = shim.storm_context(context, cast(Mapping[str, tuple[str, ...]], self.streams), {})
        inst = self.inst = shim.new_instance(self.cls, conf, context, sctx)
        if self.setup is not None:  # Flux's properties and configMethods
            self.setup(inst)
        _bind_spout(self, inst)
        self.next_tuple = inst.next_tuple  # type: ignore[method-assign]  # straight to the user's
        inst.initialize(inst.storm_conf, sctx)

    def next_tuple(self) -> None:  # replaced in open()
        self.inst.next_tuple()

    def ack(self, msg_id: Any) -> None:
        self.inst.ack(msg_id)

    def fail(self, msg_id: Any, failure: Any = None) -> None:
        self.inst.fail(msg_id)

    def activate(self) -> None:
        self.inst.activate()

    def deactivate(self) -> None:
        self.inst.deactivate()


def _bind_bolt(adapter: PystormBolt, inst: Any) -> None:
    """The instance's calls to Storm, bound to the task's collector. The methods pystorm
    defines are replaced by direct calls; a subclass's own `emit`, `ack` or `fail` stays
    and reaches the collector through `send_message` (what pystorm's would write)."""
    import pystorm.bolt as pb

    sack, sfail = adapter.ack, adapter.fail

    def ack(tup: Any) -> None:
        sack(tup.id if isinstance(tup, PTuple) else tup)

    def fail(tup: Any) -> None:
        sfail(tup.id if isinstance(tup, PTuple) else tup)

    _bind_common(adapter, inst, {"emit": _bolt_emit_msg(adapter), "ack": sack, "fail": sfail})
    if type(inst).emit in (pb.Bolt.emit, pb.BatchingBolt.emit):
        inst.emit = _bolt_emit(adapter, inst, type(inst).emit is pb.BatchingBolt.emit)
    if type(inst).ack is pb.Bolt.ack:
        inst.ack = ack
    if type(inst).fail is pb.Bolt.fail:
        inst.fail = fail


def _bolt_emit(adapter: PystormBolt, inst: Any, no_ids: bool) -> Any:
    """pystorm's `Bolt.emit` (`no_ids`: BatchingBolt's, which answers no task ids)."""
    from . import shim

    semit, sdirect, stasks = adapter.emit, adapter.emit_direct, adapter.emit_tasks
    auto = isinstance(adapter, BasicBolt)  # anchored to the input by the runtime

    def emit(
        tup: Any,
        stream: str | None = None,
        anchors: Any = None,
        direct_task: int | None = None,
        need_task_ids: bool = False,
    ) -> list[int] | None:
        if auto and anchors is None and direct_task is None and not need_task_ids:
            semit(tup, stream or "default")  # the common emit, anchored by the runtime
            return None
        if anchors is None:  # _current_tups is set per tuple: read through the instance
            anchors = [t.id for t in inst._current_tups] if inst.auto_anchor else None
        else:
            anchors = shim.anchor_ids(anchors)  # [] stays []: not anchored
        s = stream or "default"
        if direct_task is not None:
            sdirect(direct_task, tup, s, anchors)
            return [direct_task] if need_task_ids and not no_ids else None
        if need_task_ids and not no_ids:
            return stasks(tup, s, anchors)
        semit(tup, s, anchors)
        return None

    return emit


def _bolt_emit_msg(adapter: PystormBolt) -> Any:
    """An `emit` command as pystorm's Component.emit writes it (anchors are ids)."""
    semit, sdirect, stasks = adapter.emit, adapter.emit_direct, adapter.emit_tasks

    def emit_msg(msg: dict) -> Any:
        anchors, values = msg.get("anchors"), msg["tuple"]
        s, task = msg.get("stream") or "default", msg.get("task")
        if task is not None:
            sdirect(task, values, s, anchors)
            return [task]
        if msg.get("need_task_ids", True):
            return stasks(values, s, anchors)
        semit(values, s, anchors)
        return None

    return emit_msg


def _bind_spout(adapter: PystormSpout, inst: Any) -> None:
    import pystorm.spout as ps

    semit, sdirect, stasks = adapter.emit, adapter.emit_direct, adapter.emit_tasks

    def emit(
        tup: Any,
        tup_id: Any = None,
        stream: str | None = None,
        direct_task: int | None = None,
        need_task_ids: bool = False,
    ) -> list[int] | None:
        s = stream or "default"
        if direct_task is not None:
            sdirect(direct_task, tup, s, None, tup_id)
            return [direct_task] if need_task_ids else None
        if need_task_ids:
            return stasks(tup, s, None, tup_id)
        semit(tup, s, None, tup_id)
        return None

    def emit_msg(msg: dict) -> Any:
        s, task, tup_id = msg.get("stream") or "default", msg.get("task"), msg.get("id")
        if task is not None:
            sdirect(task, msg["tuple"], s, None, tup_id)
            return [task]
        if msg.get("need_task_ids", True):
            return stasks(msg["tuple"], s, None, tup_id)
        semit(msg["tuple"], s, None, tup_id)
        return None

    def no_settle(msg_id: Any) -> None:
        raise RuntimeError("a spout does not ack or fail tuples; its ack/fail are called")

    _bind_common(adapter, inst, {"emit": emit_msg, "ack": no_settle, "fail": no_settle})
    if type(inst).emit is ps.Spout.emit:
        inst.emit = emit
    # stormish's, not pystorm's: a finite spout may say it has no more input, ever
    inst.finish = adapter.finish


def _bind_common(adapter: Any, inst: Any, handlers: dict) -> None:
    from . import shim

    def error(text: Any) -> None:
        adapter.report_error(RuntimeError(text))

    inst.send_message = shim.send_message_call(inst, dict(handlers, error=error))
    inst.log = shim.log_call(inst.logger)
    inst.raise_exception = shim.raise_exception_call(adapter.report_error)
    inst.report_metric = lambda name, value: None
