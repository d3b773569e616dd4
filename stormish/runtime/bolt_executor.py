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
from ..edges import STALE
from ..tuple import TICK_STREAM, TrackedTuple, Tuple, TupleBatch
from . import wait
from .acker import AckerBolt
from .channel import StampedRows
from .emitters import UntrackedCollector
from .executor import HELD, IDLE, WORK, Executor, noop

# How long a bolt's turn may go on taking input (each take at most the queue's budget):
# long enough that a turn's fixed cost is nothing, short enough that the other executors
# of a cooperative scheduler wait at most about this long.
TURN_SECONDS = 0.002
TURN_TAKES = 16
# rows of a batch with an age executed between two looks at the clock
STAMPED_STEP = 16


class BoltExecutor(Executor):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.idle_wait = wait.from_config(self.conf, "bolt")
        self.is_acker = isinstance(self.obj, AckerBolt)
        self.basic = isinstance(self.obj, BasicBolt)
        self._late = False  # the rows executing now missed their edge's deadline
        self.dropped_stale = 0  # taken from the queue, never executed: past lifespan_ms
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
        if self.edges:
            batches = self._screen(batches)
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
                if self.edges and batches is not None:
                    batches = self._screen(batches)
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

    def _screen(self, batches: list | None) -> list | None:
        """Edges with a policy: fail the trees their channels let go and count what
        arrives; a batch whose edge checks an age is counted as it executes
        (`_execute_stamped`), the others now."""
        q = self.queue
        if q.chan_list:
            for metas, reason in q.take_lost():
                self.collector.acks.fail_lost(metas, reason)
        if batches is None:
            return None
        edges = self.edges
        for b in batches:
            e = edges.get((b[0], b[1]))
            if e is not None:
                st = e[0]
                n = len(b[2])
                if not st.policy.channel:  # a block edge: counted as it leaves the queue
                    st.arrived += n
                if b[2].__class__ is not StampedRows:
                    st.executed += n
        return batches

    def _age_ms(self, src_task: int, stream: str, values: StampedRows) -> tuple[Any, float]:
        st, now = self.edges[(src_task, stream)]
        return st, (now() - values.born) * 1000.0

    def _stale(self, st: Any, age_ms: float, metas: list | None, n: int) -> None:
        p = st.policy
        st.dropped += n
        st.stale += n
        st.note(f"stale: {n} older than lifespan_ms={p.lifespan_ms:g} ({age_ms:.0f} ms)")
        if metas is not None:
            self.collector.acks.fail_lost(metas, STALE)
        self.dropped_stale += n

    def _execute_stamped(self, batch: tuple) -> None:
        """A batch of an edge with lifespan_ms/deadline_ms, a few rows at a time: its age
        grows while it executes, and each tuple is judged when it would be executed (a
        row past the deadline is marked, past the lifespan dropped with the rest)."""
        src_task, stream, values, metas = batch
        n, i = len(values), 0
        while i < n:
            st, age = self._age_ms(src_task, stream, values)
            p = st.policy
            if p.lifespan_ms is not None and age > p.lifespan_ms:
                self._stale(st, age, None if metas is None else metas[i:], n - i)
                return
            late = p.deadline_ms is not None and age > p.deadline_ms
            j = min(n, i + STAMPED_STEP)
            k = j - i
            if late:
                st.deadline_missed += k
            st.executed += k
            self._late = late
            try:
                self._execute_batch(
                    (src_task, stream, values[i:j], None if metas is None else metas[i:j])
                )
            finally:
                self._late = False
            i = j

    def _execute_batch(self, batch: tuple) -> None:
        src_task, stream, values, metas = batch
        if values.__class__ is not list:
            self._execute_stamped(batch)
            return
        source = self.source(src_task, stream)
        if self._late:
            source = source.late_twin()
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
        source = self.source(src_task, stream)
        if values.__class__ is not list:  # an edge that checks an age: judged once, whole
            st, age = self._age_ms(src_task, stream, values)
            p = st.policy
            if p.lifespan_ms is not None and age > p.lifespan_ms:
                self._stale(st, age, metas, len(values))
                return
            if p.deadline_ms is not None and age > p.deadline_ms:
                source = source.late_twin()
                st.deadline_missed += len(values)
            st.executed += len(values)
            values = list(values)
        tb = TupleBatch(values, source, metas, col)
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
