"""Stateful bolts (Storm's IStatefulBolt) and the shells that run the checkpoint protocol
in bolts: the engine wraps each bolt that takes part (wiring.py) in one of them.

- `StatefulBoltExecutor` runs a `StatefulBolt`: barriers are aligned (`BarrierAligner`),
  the bolt's acks are held until the commit after them, and state operations are carried
  out as `StatefulCore` decides.
- `CheckpointForwarder` runs any other bolt upstream of a stateful one: once a barrier
  came from every input task it is forwarded downstream, anchored to it, and acked
  (Storm's CheckpointTupleForwarder).

In both, an input task whose copy of a checkpoint came is blocked until the last copy
came: its later tuples are held, so every bolt cuts each task's input at the same point
(the aligned cut that makes a tuple tree fall on one side of a checkpoint everywhere).

Both are Bolts whose `execute_batch` the executor calls (a batch holds one upstream
task's tuples of one stream); the executor binds the collector's methods on the shell,
and the shell hands them on to the bolt it runs in `prepare`. A shell acks and fails its
inputs itself, a BasicBolt's included.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

from ..component import BasicBolt, Bolt, prepare_bolt
from ..tuple import Tuple, TupleBatch
from .factory import open_state
from .kv import KeyValueState
from .protocol import (
    ACK,
    ACK_BARRIER,
    CHECKPOINT_FIELDS,
    CHECKPOINT_STREAM,
    COMMIT_STATE,
    EXECUTE,
    FAIL,
    FAIL_BARRIER,
    FORWARD,
    INIT_STATE,
    OLD,
    PREPARE_STATE,
    PROCESS,
    ROLLBACK_STATE,
    WAIT,
    BarrierAligner,
    StatefulCore,
)

log = logging.getLogger("stormish.state")
_HANDED_ON = ("emit", "emit_many", "emit_direct", "report_error", "reset_timeout")


class StatefulBolt(Bolt):
    """A bolt whose state survives failures. Define `init_state(self, state)` (called
    once, with the state as of the last committed checkpoint, before any tuple is
    executed) and `execute`, which reads and writes that state and acks its input:
    the engine holds each ack until the checkpoint that includes the tuple's effect has
    committed, so a failure replays it (at least once, with state).

        class Counter(StatefulBolt):
            outputs = ["word", "count"]
            def init_state(self, state):
                self.counts = state
            def execute(self, tup):
                n = self.counts.get(tup["word"], 0) + 1
                self.counts.put(tup["word"], n)
                self.emit([tup["word"], n], anchors=[tup])
                self.ack(tup)
    """

    def init_state(self, state: KeyValueState) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define init_state(state)")

    def pre_prepare(self, txid: int) -> None:
        """Called before the state is prepared for checkpoint `txid`."""

    def pre_commit(self, txid: int) -> None:
        """Called before checkpoint `txid` is committed."""

    def pre_rollback(self) -> None:
        """Called before the state goes back to the last committed checkpoint."""


class _Shell(Bolt):
    """What the shells share: the bolt they run, the aligned cut of the checkpoint
    stream, forwarding.

    The executor hands the shell one upstream task's batch of one stream at a time. The
    shell keeps each batch of a *blocked* input task (one whose copy of the checkpoint
    being aligned came: `BarrierAligner`) in `_held`, unexecuted, in arrival order, and
    runs it once the task is unblocked, before anything that came after it. The shell
    acks and fails every input itself (an executor acking a BasicBolt's batch on return
    would ack tuples still held)."""

    def __init__(self, bolt: Bolt, input_tasks: int):
        self.bolt = bolt
        self.input_tasks = input_tasks

    def _stream_specs(self) -> dict[str, Any]:
        specs = self.bolt._stream_specs()
        specs[CHECKPOINT_STREAM] = CHECKPOINT_FIELDS
        return specs

    def __getattr__(self, name: str) -> Any:
        # what the worker asks of a component (result, progress, held) is the bolt's
        if name.startswith("__") or name == "bolt":
            raise AttributeError(name)
        return getattr(self.bolt, name)

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self._aligner = BarrierAligner(self.input_tasks)
        self._held: deque[tuple[int, Any]] = deque()  # (task, batch or barrier tuples)
        self._todo: deque[tuple[int, Any]] = deque()
        bolt = self.bolt
        for name in _HANDED_ON:
            setattr(bolt, name, getattr(self, name))
        bolt.ack, bolt.fail = self.ack, self.fail
        bolt.ack_batch, bolt.fail_batch = self.ack_batch, self.fail_batch

    def cleanup(self) -> None:
        self.bolt.cleanup()

    def _engine_runs(self) -> Bolt:
        """The bolt this shell runs: its `on_turn` and `holds_work` are the executor's to
        call (component.bolt_hook); what they emit and ack goes through the shell's
        methods handed to it, as `execute`'s does."""
        return self.bolt

    def held_tuples(self) -> int:
        """Tuples held behind a checkpoint being aligned (for tests and statistics)."""
        return sum(len(item) for _, item in self._held)

    def execute_batch(self, batch: TupleBatch) -> None:
        task = batch.source.task
        todo = self._todo
        todo.append((task, list(batch) if batch.stream == CHECKPOINT_STREAM else batch))
        while todo:
            task, item = todo.popleft()
            if self._aligner.blocked(task):
                self._held.append((task, item))
            elif isinstance(item, list):
                self._barriers(task, item)
            else:
                self._data(item)

    def _barriers(self, task: int, tuples: list[Tuple]) -> None:
        """Each copy not acted on is acked at once; the last copy of a checkpoint is
        acted on (and acked by `_on_barrier`). A copy that blocks its task holds the
        rest of the batch."""
        for i, tup in enumerate(tuples):
            txid, action, emission = tup.values
            verdict = self._aligner.arrive(action, txid, task, emission)
            if verdict == PROCESS:
                self._on_barrier(tup, action, txid)
            else:
                self.ack(tup)
            self._release()
            if verdict == WAIT:
                if i + 1 < len(tuples):
                    self._held.append((task, tuples[i + 1 :]))
                return

    def _release(self) -> None:
        """What unblocked tasks had held goes first: it came before anything still to do."""
        if not self._held:
            return
        keep: deque[tuple[int, Any]] = deque()
        free: list[tuple[int, Any]] = []
        for entry in self._held:
            (keep if self._aligner.blocked(entry[0]) else free).append(entry)
        self._held = keep
        self._todo.extendleft(reversed(free))

    def _data(self, batch: TupleBatch) -> None:
        raise NotImplementedError

    def _on_barrier(self, tup: Tuple, action: str, txid: int) -> None:
        raise NotImplementedError

    def _forward(self, tup: Tuple) -> None:
        self.emit(tup.values, CHECKPOINT_STREAM, anchors=[tup])

    def _run(self, tup: Tuple) -> bool:
        """Execute one tuple as the executor would a Bolt's: an exception fails it."""
        try:
            self.bolt.execute(tup)
        except Exception as exc:  # noqa: BLE001 - the tuple fails, the worker lives
            self.fail(tup, f"{type(exc).__name__}: {exc}"[:500])
            self.report_error(exc)
            return False
        return True


class CheckpointForwarder(_Shell):
    """A Bolt upstream of a stateful bolt: forwards barriers, runs the bolt unchanged."""

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        super().prepare(conf, context)
        prepare_bolt(self.bolt, conf, context)
        self._own_batch = type(self.bolt).execute_batch is not Bolt.execute_batch

    def _data(self, batch: TupleBatch) -> None:
        if self._own_batch:
            self.bolt.execute_batch(batch)
        else:
            for tup in batch:
                self._run(tup)

    def _on_barrier(self, tup: Tuple, action: str, txid: int) -> None:
        self._forward(tup)
        self.ack(tup)


class BasicCheckpointForwarder(CheckpointForwarder):
    """A BasicBolt upstream of a stateful bolt, run as the executor runs one: its emits
    are anchored to the tuple being executed, which is acked when `execute` returns and
    failed when it raises (only that one); a bolt's own execute_batch keeps its batch
    semantics (the batch acked when it returns, failed when it raises). The shell does
    this itself, not the executor: a batch it holds is not executed yet."""

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        super().prepare(conf, context)
        self._current: Any = None  # the input being executed: emits anchor to it
        bolt = self.bolt
        bolt.emit, bolt.emit_many = self._emit_anchored, self._emit_many_anchored
        bolt.emit_direct = self._emit_direct_anchored

    def _data(self, batch: TupleBatch) -> None:
        if self._own_batch:
            self._current = batch  # iterating it names the input (its collector's current)
            try:
                self.bolt.execute_batch(batch)
            except Exception as exc:  # noqa: BLE001 - the batch fails, the worker lives
                self.fail_batch(batch)
                self.report_error(exc)
            else:
                self.ack_batch(batch)
            finally:
                self._current = None
            return
        for tup in batch:
            self._current = tup
            if self._run(tup):
                self.ack(tup)
        self._current = None

    def _anchor(self, anchors: Any) -> Any:
        if anchors is not None:
            return anchors
        cur = self._current
        if isinstance(cur, TupleBatch):
            cur = cur._collector.current
        return None if cur is None else [cur]

    def _emit_anchored(
        self, values: Any, stream: str = "default", anchors: Any = None, msg_id: Any = None
    ) -> None:
        self.emit(values, stream, anchors=self._anchor(anchors))

    def _emit_many_anchored(
        self, rows: Any, stream: str = "default", anchors: Any = None, msg_id: Any = None
    ) -> None:
        self.emit_many(rows, stream, anchors=self._anchor(anchors))

    def _emit_direct_anchored(
        self,
        task: int,
        values: Any,
        stream: str = "default",
        anchors: Any = None,
        msg_id: Any = None,
    ) -> None:
        self.emit_direct(task, values, stream, anchors=self._anchor(anchors))


class StatefulBoltExecutor(_Shell):
    """Runs a StatefulBolt (Storm's StatefulBoltExecutor)."""

    bolt: StatefulBolt

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        super().prepare(conf, context)
        self._core = StatefulCore()
        self.bolt.ack = self._core.acked  # held until the commit after it
        self.bolt.ack_batch = self._hold_batch
        self.state = open_state(conf, context)
        last = self.state.committed_acks()
        if last is not None:  # this task's previous process may have died before they left
            self.ack_committed(last[0], last[1], 0)
        prepare_bolt(self.bolt, conf, context)

    def _hold_batch(self, batch: TupleBatch) -> None:
        for tup in batch.tracked():
            self._core.acked(tup)

    def _data(self, batch: TupleBatch) -> None:
        if self._core.initialized:
            for tup in batch:
                self._run(tup)
        else:
            for tup in batch:
                self._core.tuple_in(tup)

    def _on_barrier(self, tup: Tuple, action: str, txid: int) -> None:
        core = self._core
        log.debug(
            "%s %s: %d acks held, %d prepared, %d waiting",
            action, txid, len(core.acked_since), len(core.prepared), len(core.waiting),
        )  # fmt: skip
        try:
            steps = self._core.checkpoint(action, txid)
            # a commit's ACKs left with it, as one message (COMMIT_STATE): counted there
            self._acked_by_commit = sum(1 for what, _ in steps if what == ACK)
            for what, arg in steps:
                if what != ACK:
                    self._carry_out(what, arg, tup)
        except Exception as exc:  # noqa: BLE001 - Storm's: fail the barrier, report
            self.fail(tup)
            self.report_error(exc)

    def _carry_out(self, what: str, arg: Any, tup: Tuple) -> None:
        bolt, state = self.bolt, self.state
        if what == EXECUTE:
            self._run(arg)
        elif what == FAIL:
            self.fail(arg)
        elif what == PREPARE_STATE:
            bolt.pre_prepare(arg)
            state.prepare_commit(arg, self._held_acks())
        elif what == COMMIT_STATE:
            bolt.pre_commit(arg)
            # the acks prepared with it (by this process, or by its last one when this one
            # rolls the commit forward), tagged with the txid: sent again after a restart
            self.ack_committed(arg, state.commit(arg), self._acked_by_commit)
        elif what == ROLLBACK_STATE:
            bolt.pre_rollback()
            state.rollback()
        elif what == INIT_STATE:
            bolt.init_state(state)
        elif what == FORWARD:
            self._forward(tup)
        elif what == ACK_BARRIER:
            self.ack(tup)
        elif what == FAIL_BARRIER:
            self.fail(tup)

    def _held_acks(self) -> list[tuple[int, int]]:
        """What acking the prepared tuples sends, folded per tree: kept with the prepared
        transaction and sent when it commits (`KeyValueState.commit`), so that a restarted
        task that rolls it forward can still send it (its previous process held these
        acks and died before the commit), and kept after the commit, so that a task
        restarted after it sends it again (its previous process may have died before
        the acks left)."""
        from ..runtime.ack_folder import tree_pairs  # here: the testing kit imports this module

        folded: dict[int, int] = {}
        for t in self._core.prepared:
            meta = getattr(t, "meta", None)
            if meta:
                for root, edge in tree_pairs(meta, t.source.task):
                    folded[root] = folded.get(root, 0) ^ edge ^ t.ack_val
        return list(folded.items())

    def cleanup(self) -> None:
        try:
            super().cleanup()
        finally:
            self.state.close()


def wrap(bolt: Bolt, input_tasks: int) -> _Shell:
    if isinstance(bolt, StatefulBolt):
        return StatefulBoltExecutor(bolt, input_tasks)
    if isinstance(bolt, BasicBolt):
        return BasicCheckpointForwarder(bolt, input_tasks)
    return CheckpointForwarder(bolt, input_tasks)


__all__ = ["OLD", "StatefulBolt", "wrap"]
