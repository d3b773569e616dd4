"""The bolt executor: Storm 2.0's bolt loop on one thread per task.

Bolt loop: flush the pendingEmitQ first (stopping at the first refusal); while anything
remains parked, read no new input and idle under the backpressure wait strategy, except
on a cycle (below); otherwise consume up to the queue's budget, execute it, and idle under
the bolt wait strategy when there is nothing.

Cycles (beyond Storm, whose STORM-3637 topologies deadlock): an executor on a cycle of
the topology graph keeps consuming input while parked, as long as its pendingEmitQ holds
fewer than `topology.cycle.drain.budget` tuples; a parked executor that stops draining is
what closes the wait cycle. While such an executor holds more than half its budget, the
spouts upstream of the cycle stop calling `next_tuple`, so a cycle under sustained
overload is not fed faster than it drains. The cycle then always moves: every executor
on it either consumes (freeing room for its upstream) or has room in its budget, and the
tuples the cycle holds are bounded by what the spouts injected, which
`topology.max.spout.pending` bounds.
"""

from __future__ import annotations

from typing import Any

from ..component import BasicBolt, Bolt
from ..tuple import TICK_STREAM, TrackedTuple, Tuple, TupleBatch
from . import wait
from .acker import AckerBolt
from .emitters import UntrackedCollector
from .executor import HELD, IDLE, WORK, Executor, noop

# How long a bolt's turn may go on taking input (each take at most the queue's budget):
# long enough that a turn's fixed cost is nothing, short enough that the other executors
# of a cooperative scheduler wait at most about this long.
TURN_SECONDS = 0.002
TURN_TAKES = 16


class BoltExecutor(Executor):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.idle_wait = wait.from_config(self.conf, "bolt")
        self.is_acker = isinstance(self.obj, AckerBolt)
        self.basic = isinstance(self.obj, BasicBolt)
        self._bind()

    def _bind(self) -> None:
        obj, col = self.obj, self.collector
        obj.emit, obj.emit_many = col.emit, col.emit_many  # the role's collector
        if isinstance(col, UntrackedCollector):
            obj.emit = col.bound_emit()
        if not col.acking:
            obj.ack = self._count_ack
            obj.fail = self._count_fail
            obj.ack_batch = self._count_ack_batch
            obj.fail_batch = self._count_fail_batch
            obj.reset_timeout = noop
        else:
            obj.ack = self._ack
            obj.fail = self._fail
            obj.ack_batch = self._ack_batch
            obj.fail_batch = self._fail_batch
            obj.reset_timeout = col.acks.reset
        obj.emit_direct = col.emit_direct
        obj.report_error = self.report_error

    def _count_ack(self, tup: Tuple) -> None:
        self.acked += 1

    def _count_fail(self, tup: Tuple) -> None:
        self.failed += 1

    def _count_ack_batch(self, batch: TupleBatch) -> None:
        self.acked += len(batch)

    def _count_fail_batch(self, batch: TupleBatch) -> None:
        self.failed += len(batch)

    def _ack(self, tup: Tuple) -> None:
        self.acked += 1
        self.collector.acks.ack(tup)

    def _ack_batch(self, batch: TupleBatch) -> None:
        self.acked += len(batch)
        self.collector.acks.ack_batch(batch)

    def _fail_batch(self, batch: TupleBatch) -> None:
        self.failed += len(batch)
        self.collector.acks.fail_batch(batch)

    def _fail(self, tup: Tuple, error: str | None = None) -> None:
        self.failed += 1
        self.collector.acks.fail(tup, error)

    def begin(self) -> None:
        """Everything before the first loop turn, on the thread that runs the loop."""
        self.obj.prepare(self.conf, self.context)
        if self.is_acker:
            self._exec = self._execute_raw
        elif type(self.obj).execute_batch is not Bolt.execute_batch:
            self._exec = self._execute_user_batch
        else:
            self._exec = self._execute_batch
        self.idle = 0
        self.next_flush = self.clock.now() + self.flush_every

    def end(self) -> None:
        self.collector.flush_all()
        self.obj.cleanup()

    def step(self) -> int:
        """One turn of the bolt loop: WORK (it executed input), IDLE (nothing to do) or
        HELD (parked under backpressure). The caller idles on anything but WORK and
        counts `idle` up; a step resets it when work comes."""
        self.turns += 1
        col = self.collector
        now = self.clock.now
        if col.pending and not col.flush_pending():
            t = now()
            self._enter_bp(t)
            q = self.queue
            drain = self.on_cycle and col.pending_count < self.budget and q.has_data()
            if self.on_cycle:
                self.worker.cycle_congestion(self.task, col.pending_count * 2 > self.budget)
            if not drain:
                return HELD
        elif self.bp_since is not None:
            self._leave_bp(now())
            if self.on_cycle:
                self.worker.cycle_congestion(self.task, False)
            # what was emitted while parked may sit in partial outboxes: the next idle
            # spell must begin with a flush, or with no more input it sat for ever
            self.idle = 0
        q = self.queue
        batches = q.consume()
        if batches is not None:
            self.idle = 0
            execute = self._exec
            t1 = now()
            end = t1 + TURN_SECONDS
            takes = TURN_TAKES  # a bound on a fake clock too, where time stands still
            while True:
                for batch in batches:  # time per batch, as executed counts: they move together
                    t0 = t1
                    execute(batch)
                    t1 = now()
                    self.exec_seconds += t1 - t0
                # Another take while the turn lasts: a take is bounded (what a task holds
                # unseen stays bounded), a turn by time. With one take a turn, a bolt fed
                # 8 tuples for each its upstream takes (a split) got an eighth of the
                # throughput it needed and its queue filled (backpressure, overflow).
                takes -= 1
                if t1 >= end or not takes or col.pending or not self.running:
                    break
                batches = q.consume()
                if batches is None:
                    break
            if t1 >= self.next_flush:
                col.flush_all()
                col.refresh_load()
                self.next_flush = t1 + self.flush_every
            return WORK
        if self.idle == 0:
            col.flush_all()
            self.next_flush = now() + self.flush_every
        return IDLE

    def _execute_batch(self, batch: tuple) -> None:
        src_task, stream, values, metas = batch
        source = self.source(src_task, stream)
        execute = self.obj.execute
        n = len(values)
        if metas is None:
            if self.basic and not self.collector.acking:
                for v in values:
                    try:
                        execute(Tuple(v, source))
                    except Exception as exc:  # noqa: BLE001 - the tuple fails, the worker lives
                        self._on_error(exc, None)
                self.acked += n
            else:
                col = self.collector
                for v in values:
                    t = Tuple(v, source)
                    col.current = t
                    try:
                        execute(t)
                    except Exception as exc:  # noqa: BLE001
                        self._on_error(exc, t)
        elif self.basic:
            col = self.collector
            folder = col.acks
            fail = folder.fail
            acks = folder.acks
            get = acks.get
            failed = 0
            for v, m in zip(values, metas, strict=True):
                t = TrackedTuple(v, source, m) if m else Tuple(v, source)
                col.current = t
                try:
                    execute(t)
                except Exception as exc:  # noqa: BLE001
                    failed += 1
                    self._uncaught(exc)
                    fail(t, _error_text(exc))
                    continue
                if m:  # AckFolder.ack, inlined: a call per reliable tuple less
                    val = t.ack_val
                    for root, e in m:
                        acks[root] = get(root, 0) ^ e ^ val
            if len(acks) >= folder.batch_size:
                folder.flush()
            self.acked += n - failed
            self.failed += failed
        else:
            for v, m in zip(values, metas, strict=True):
                t = TrackedTuple(v, source, m) if m else Tuple(v, source)
                try:
                    execute(t)
                except Exception as exc:  # noqa: BLE001
                    self._on_error(exc, t)
        if stream != TICK_STREAM:
            self.consumed += n
        self.executed += n

    def _execute_user_batch(self, batch: tuple) -> None:
        src_task, stream, values, metas = batch
        col = self.collector
        tb = TupleBatch(values, self.source(src_task, stream), metas, col)
        n = len(values)
        try:
            self.obj.execute_batch(tb)
        except Exception as exc:  # noqa: BLE001 - the batch fails, the worker lives
            self._uncaught(exc)
            if self.basic:
                self.failed += n
                if metas is not None:
                    col.acks.fail_batch(tb, _error_text(exc))
        else:
            if self.basic:
                self.acked += n
                if metas is not None:
                    col.acks.ack_batch(tb)
        col.current = None
        if stream != TICK_STREAM:
            self.consumed += n
        self.executed += n

    def _on_error(self, exc: Exception, tup: Tuple | None) -> None:
        self._uncaught(exc)
        if tup is not None and not self.basic:
            self._fail(tup, _error_text(exc))
        elif tup is not None:
            self.collector.acks.fail(tup, _error_text(exc))
            self.failed += 1
        else:
            self.failed += 1
            self.acked -= 1

    def _execute_raw(self, batch: tuple) -> None:
        src_task, stream, values, _ = batch
        self.obj.execute_raw(stream, values, self.collector.emit_direct_system)
        n = len(values)
        self.executed += n
        if stream != TICK_STREAM:
            self.consumed += n


def _error_text(exc: BaseException) -> str:
    """What a fail tells the spout of the error that caused it (Failure.error)."""
    return f"{type(exc).__name__}: {exc}"[:500]
