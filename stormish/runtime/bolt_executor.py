"""The bolt executor: Storm 2.0's bolt loop on one thread per task.

Bolt loop: flush the pendingEmitQ first (stopping at the first refusal); while anything
remains parked, read no new input and idle under the backpressure wait strategy, except
on a cycle (below); otherwise consume up to the queue's budget, execute it, and idle under
the bolt wait strategy when there is nothing. A bolt that defines `Bolt.on_turn` is
called first in every turn that is not parked, and is parked as under backpressure while
it returns True (a client's queue is full: stormish.kafka.KafkaSink).

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

from bisect import bisect_right
from typing import Any

from ..component import BasicBolt, Bolt, prepare_bolt
from ..edges import STALE
from ..errors import TopologyError
from ..settle import ACK, BATCH_RESULT_COUNT, BATCH_RESULT_VALUE, DEAD_LETTER, FAIL, OVERFLOW
from ..tuple import TICK_STREAM, TrackedTuple, Tuple, TupleBatch
from . import wait
from .acker import AckerBolt
from .batcher import Batcher
from .channel import LaneChannel, StampedRows
from .emitters import BasicCollector, UntrackedCollector
from .executor import HELD, IDLE, WORK, Executor, noop
from .grouping import lane_of
from .lane_pool import LanePool
from .process_latency import ProcessLatency
from .stats import EXECUTE_BUCKETS

_new = object.__new__  # makes a Tuple without calling its __init__ (hot loops below)

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
        # ordered_lanes edges into this task, by (src_task, stream): (key indices, lanes)
        self.lane_keys: dict[tuple[int, str], tuple[tuple[int, ...], int]] = {}
        # batch settle (stormish.settle): the bolt sets batch_size
        size = getattr(self.obj, "batch_size", None)
        self.batcher: Batcher | None = None
        self.pool: LanePool | None = None  # concurrent lanes (topology.lanes.concurrency)
        if size is not None and not self.is_acker:
            wait_ms = getattr(self.obj, "batch_max_wait_ms", None)
            self.batcher = Batcher(size, None if wait_ms is None else wait_ms / 1000.0)
        self.dropped_stale = 0  # taken from the queue, never executed: past lifespan_ms
        # Storm's process latency, matched per batch (runtime/process_latency.py); the
        # acker's own inputs are never acked
        self.process: ProcessLatency | None = None
        if not self.is_acker:
            self.process = ProcessLatency(float(self.conf["topology.message.timeout.secs"]))
        # a Bolt settles its tuples itself and may keep them (a settle batch's wait too)
        self._keeps = not self.basic or self.batcher is not None
        # Bolt.on_turn, where the bolt defines it: called before each turn takes input
        on_turn = getattr(type(self.obj), "on_turn", Bolt.on_turn)
        self._on_turn = None if on_turn is Bolt.on_turn else self.obj.on_turn
        self._bind()

    def _bind(self) -> None:
        obj, col = self.obj, self.collector
        obj.emit, obj.emit_many = col.emit, col.emit_many  # the role's collector
        if isinstance(col, (UntrackedCollector, BasicCollector)):
            obj.emit = col.bound_emit()
        if not col.acking:
            obj.ack = self._count_ack
            obj.fail = self._count_fail
            obj.ack_batch = self._count_ack_batch
            obj.fail_batch = self._count_fail_batch
            obj.reset_timeout = noop
            obj.ack_committed = self._count_committed
        else:
            obj.ack = self._ack
            obj.fail = self._fail
            obj.ack_batch = self._ack_batch
            obj.fail_batch = self._fail_batch
            obj.reset_timeout = col.acks.reset
            obj.ack_committed = self._ack_committed
        obj.emit_direct = col.emit_direct
        obj.emit_tasks = col.emit_tasks
        obj.report_error = self.report_error

    def _count_ack(self, tup: Tuple) -> None:
        self.acked += 1

    def _count_committed(self, txid: int, acks: Any, tuples: int) -> None:
        self.acked += tuples

    def _ack_committed(self, txid: int, acks: Any, tuples: int) -> None:
        """A stateful bolt's acks of checkpoint `txid` (for `tuples` of its inputs)."""
        self.acked += tuples
        self.collector.acks.committed(txid, acks)

    def _count_fail(self, tup: Tuple, error: str | None = None) -> None:
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
        prepare_bolt(self.obj, self.conf, self.context)
        # work that arrives outside the receive queue (a multilang child's messages):
        # `poll_outside()` handles what has come and says whether anything had
        self.outside = getattr(self.obj, "poll_outside", None)
        if self.is_acker:
            self._exec = self._execute_raw
        elif self.batcher is not None:
            self._exec = self._execute_settle
        elif type(self.obj).execute_batch is not Bolt.execute_batch:
            self._exec = self._execute_user_batch
        else:
            self._exec = self._execute_batch
        self.idle = 0
        self.next_flush = self.clock.now() + self.flush_every
        if self.lane_keys and not self.basic and self.batcher is None:
            # a Bolt settles an ordered_lanes tuple when it acks or fails it
            ack, fail = self.obj.ack, self.obj.fail
            settle, lanes = self.queue.settle, self.lane_keys

            def lane_ack(tup: Tuple) -> None:
                ack(tup)
                key = (tup.source.task, tup.source.stream)
                if key in lanes:
                    settle(key, 1)

            def lane_fail(tup: Tuple, *args: Any) -> None:
                fail(tup, *args)
                key = (tup.source.task, tup.source.stream)
                if key in lanes:
                    settle(key, 1)

            self.obj.ack, self.obj.fail = lane_ack, lane_fail
            ack_batch, fail_batch = self.obj.ack_batch, self.obj.fail_batch

            def lane_ack_batch(batch: TupleBatch) -> None:  # all of a received batch
                ack_batch(batch)
                key = (batch.source.task, batch.source.stream)
                if key in lanes:
                    settle(key, len(batch))

            def lane_fail_batch(batch: TupleBatch, *args: Any) -> None:
                fail_batch(batch, *args)
                key = (batch.source.task, batch.source.stream)
                if key in lanes:
                    settle(key, len(batch))

            self.obj.ack_batch, self.obj.fail_batch = lane_ack_batch, lane_fail_batch
        conc = self.conf["topology.lanes.concurrency"]
        if self.lane_keys and conc > 1:
            self.pool = LanePool(conc, self.queue.wake, f"{self.component}[{self.task}]")
            self.pool.bind(self.obj)

    def end(self) -> None:
        if self.batcher is not None:  # a partial batch is executed, not lost
            for b in self.batcher.drain():
                self._run_settle(*b)
            self._settled_outside()
        pool = self.pool
        if pool is not None:  # what the lanes are running finishes and is replayed
            while pool.pending:
                if not pool.completed():
                    self.queue.wait(0.05)
            pool.stop(1.0)
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
        elif self._on_turn is not None and self._turn_held():
            self._enter_bp(now())  # the bolt holds its input back (Bolt.on_turn)
            return HELD
        elif self.bp_since is not None:
            self._leave_bp(now())
            if self.on_cycle:
                self.worker.cycle_congestion(self.task, False)
            # what was emitted while parked may sit in partial outboxes: the next idle
            # spell must begin with a flush, or with no more input it sat for ever
            self.idle = 0
        q = self.queue
        outside = self.outside
        if outside is not None and outside():  # a multilang child's messages
            self._settled_outside()  # its acks and fails came outside an execute
            self.idle = 0
            if col.pending or not q.has_data():
                return WORK
        replayed = self.pool.completed() if self.pool is not None else 0
        if replayed:
            self._settled_outside()
        batches = q.consume()
        if self.edges:
            batches = self._screen(batches)
        if replayed and batches is None:
            self.idle = 0
            return WORK
        bt = self.batcher
        if bt is not None and bt.waiting and self._flush_batches(bt, batches is None):
            self._settled_outside()
            self.idle = 0
            if batches is None:
                return WORK
        if batches is not None:
            self.idle = 0
            execute = self._exec
            hist, bounds = self.exec_hist, EXECUTE_BUCKETS
            process, keeps, tracked_only = self.process, self._keeps, col.acking
            t1 = now()
            end = t1 + TURN_SECONDS
            takes = TURN_TAKES  # a bound on a fake clock too, where time stands still
            while True:
                for batch in batches:  # time per batch, as executed counts: they move together
                    t0 = t1
                    stale = self.dropped_stale
                    execute(batch)
                    t1 = now()
                    self.exec_seconds += t1 - t0
                    n = len(batch[2])
                    if n:
                        hist[bisect_right(bounds, (t1 - t0) / n)] += n
                        if process is not None:  # per batch, never per tuple
                            process.executed(
                                t0,
                                t1,
                                n - (self.dropped_stale - stale),
                                self.acked + self.failed,
                                keeps
                                and batch[1] != TICK_STREAM
                                and (batch[3] is not None or not tracked_only),
                            )
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

    def _turn_held(self) -> bool:
        """Bolt.on_turn; what it settled goes out with this turn's flush (an idle turn
        flushes only when it follows work, so it counts as work here)."""
        settled = self.acked + self.failed
        held = self._on_turn()  # type: ignore[misc]  # set: step() checked
        if self.acked + self.failed != settled:
            self._settled_outside()
            self.idle = 0
            if held:
                self.collector.flush_all()
        return held

    def _settled_outside(self) -> None:
        """Tuples settled outside the loop's executes (runtime/process_latency.py)."""
        if self.process is not None:
            self.process.outside(self.clock.now(), self.acked + self.failed)

    # -- batch settle ---------------------------------------------------------------------
    def _execute_settle(self, batch: tuple) -> None:
        """Rows into the batcher, by lane for an ordered_lanes edge; full batches run."""
        src_task, stream, values, metas = batch
        if (src_task, stream) in self.barrier_keys:  # formed by its edge: one batch, whole
            self._run_settle(src_task, stream, values, metas, False)
            return
        bt = self.batcher
        assert bt is not None
        late = False
        if values.__class__ is not list:  # an edge that checks an age: judged on arrival
            st, age = self._age_ms(src_task, stream, values)
            p = st.policy
            if p.lifespan_ms is not None and age > p.lifespan_ms:
                self._stale(st, age, metas, len(values))
                return
            late = p.deadline_ms is not None and age > p.deadline_ms
            if late:
                st.missed(len(values))
            st.executed += len(values)
            values = list(values)
        now = self.clock.now()
        lane = self.lane_keys.get((src_task, stream))
        if lane is None:
            ready = bt.add((src_task, stream), src_task, stream, values, metas, now, late)
        else:
            idx, lanes = lane
            by: dict[int, list[int]] = {}
            for i, v in enumerate(values):
                by.setdefault(_lane(v, idx, lanes), []).append(i)
            ready = []
            for ln, rows in by.items():
                ready += bt.add(
                    (src_task, stream, ln),
                    src_task,
                    stream,
                    [values[i] for i in rows],
                    None if metas is None else [metas[i] for i in rows],
                    now,
                    late,
                )
        for b in ready:
            self._run_settle(*b)

    def _flush_batches(self, bt: Batcher, idle: bool) -> bool:
        """Partial batches whose wait is over; all of them when the task has nothing
        else to take and no wait is set, or when an ordered_lanes edge is at its
        in-flight bound (nothing more can come: waiting would only stall it)."""
        if idle and (bt.max_wait is None or self._lanes_full()):
            ready = bt.drain()
        else:
            due = bt.next_due()
            if due is None or self.clock.now() < due:
                return False
            ready = bt.due(self.clock.now())
        for b in ready:
            self._run_settle(*b)
        return bool(ready)

    def _lanes_full(self) -> bool:
        q = self.queue
        return any(
            ch.in_flight >= ch.policy.max_in_flight
            for ch in q.chan_list
            if isinstance(ch, LaneChannel)
        )

    def _run_settle(self, src_task: int, stream: str, rows: list, metas: Any, late: bool) -> None:
        """One formed batch through the bolt; its results settle it tuple by tuple (with
        concurrent lanes, the call runs on the lane's pool thread, the settling here)."""
        source = self.source(src_task, stream)
        if late:
            source = source.late_twin()
        pool = self.pool
        if pool is not None and (src_task, stream) in self.lane_keys:
            idx, lanes = self.lane_keys[(src_task, stream)]
            lane = (src_task, stream, _lane(rows[0], idx, lanes))
            tb = TupleBatch(rows, source, metas, _PoolCurrent(pool.capture))
            t0 = self.clock.now()

            def work() -> Any:
                return self.obj.execute_batch(tb)

            def done(result: Any) -> None:
                _replay(self.collector, result)
                self._settle(src_task, stream, tb, rows, metas, source, result, t0)

            pool.submit(lane, _with_ops(work, pool), done)
            return
        tb = TupleBatch(rows, source, metas, self.collector)
        t0 = self.clock.now()
        try:
            result: Any = self.obj.execute_batch(tb)
        except Exception as exc:  # noqa: BLE001 - the batch fails, the worker lives
            result = exc
        self._settle(src_task, stream, tb, rows, metas, source, (result, []), t0)

    def _settle(
        self,
        src_task: int,
        stream: str,
        tb: TupleBatch,
        rows: list,
        metas: Any,
        source: Any,
        outcome: Any,
        t0: float,
    ) -> None:
        col = self.collector
        results, _ops = outcome
        n = len(rows)
        error = None
        if isinstance(results, Exception):
            self._uncaught(results)
            error = _error_text(results)
            results = [FAIL] * n
        elif isinstance(results, BaseException):
            raise results
        if results is None:
            results = [ACK] * n
        elif not isinstance(results, list | tuple) or len(results) != n:
            got = len(results) if isinstance(results, list | tuple) else type(results).__name__
            self.report_error(
                TopologyError(
                    f"component {self.component!r}: execute_batch returned {got} results "
                    f"for {n} tuples; the unmatched ones are dead-lettered ({BATCH_RESULT_COUNT})"
                )
            )
            results = list(results) if isinstance(results, list | tuple) else []
        tuples = tb.tracked() if metas is not None else None
        acks = col.acks if col.acking else None
        for i in range(n):
            r = results[i] if i < len(results) else BATCH_RESULT_COUNT
            t = tuples[i] if tuples is not None else None
            if r == ACK:
                self.acked += 1
                if acks is not None and t is not None:
                    acks.ack(t)
            elif r == FAIL:
                self.failed += 1
                if acks is not None and t is not None:
                    acks.fail(t, error)
            else:
                why = r if r in (DEAD_LETTER, BATCH_RESULT_COUNT) else BATCH_RESULT_VALUE
                self.dead_lettered += 1
                if acks is not None and t is not None:
                    acks.ack(t)  # given up for good: the tree completes, no replay
                col.emit_dead_letter((None, stream, tuple(rows[i]), source.component, str(why), 1))
        dt = self.clock.now() - t0
        self.exec_seconds += dt
        if n:
            self.exec_hist[bisect_right(EXECUTE_BUCKETS, dt / n)] += n
        self.executed += n
        if stream != TICK_STREAM:
            self.consumed += n
        if (src_task, stream) in self.lane_keys:
            self.queue.settle((src_task, stream), n)

    # -- concurrent lanes (topology.lanes.concurrency) ---------------------------------------
    def _submit_lanes(self, batch: tuple) -> None:
        """An ordered_lanes batch, per lane, to the pool: each lane's tuples run in order
        on a pool thread; emits, acks and errors are replayed here when they complete."""
        pool = self.pool
        assert pool is not None
        src_task, stream, values, metas = batch
        idx, lanes = self.lane_keys[(src_task, stream)]
        by: dict[int, list[int]] = {}
        for i, v in enumerate(values):
            by.setdefault(_lane(v, idx, lanes), []).append(i)
        source = self.source(src_task, stream)
        execute, cap = self.obj.execute, pool.capture
        for ln, rows in by.items():
            part = [(values[i], metas[i] if metas is not None else None) for i in rows]

            def work(part: list = part) -> list:
                out = []
                for v, m in part:
                    t = TrackedTuple(v, source, m) if m else Tuple(v, source)
                    cap.ops, cap.current = [], t
                    try:
                        execute(t)
                        exc = None
                    except Exception as e:  # noqa: BLE001 - handed to the task's thread
                        exc = e
                    out.append((t, cap.ops, exc))
                return out

            pool.submit((src_task, stream, ln), work, self._lane_done(src_task, stream))

    def _lane_done(self, src_task: int, stream: str) -> Any:
        def done(result: Any) -> None:
            if isinstance(result, BaseException):
                raise result
            col = self.collector
            acks = col.acks
            n = 0
            for t, ops, exc in result:
                col.current = t
                for real, args, kw, _cur in ops:
                    real(*args, **kw)
                n += 1
                if exc is not None:
                    self._on_error(exc, t, [r[0] for r in result], t)
                elif self.basic:
                    self.acked += 1
                    if t.meta:
                        acks.ack(t)
            col.current = None
            self.executed += n
            self.consumed += n
            if self.basic:
                self.queue.settle((src_task, stream), n)

        return done

    def _screen(self, batches: list | None) -> list | None:
        """Edges with a policy: fail the trees their channels let go and count what
        arrives; a batch whose edge checks an age is counted as it executes
        (`_execute_stamped`), the others now."""
        q = self.queue
        if q.chan_list:
            lost, rejected = q.take_lost()
            if lost or rejected:  # what they emit is flushed this turn, work or not
                self.idle = 0
            for metas, reason in lost:
                self.collector.acks.fail_lost(metas, reason)
            for src_task, stream, rows in rejected:  # a `fail` edge's: dead letters
                comp = self.source(src_task, stream).component
                dead = self.collector.emit_dead_letter
                for v in rows:
                    dead((None, stream, tuple(v), comp, OVERFLOW, 1))
                self.dead_lettered += len(rows)
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
        if self.pool is not None and self.batcher is None:
            lanes = self.lane_keys
            rest = []
            for b in batches:
                if (b[0], b[1]) in lanes:
                    self._submit_lanes(b)
                else:
                    rest.append(b)
            return rest or None
        return batches

    def _age_ms(self, src_task: int, stream: str, values: StampedRows) -> tuple[Any, float]:
        st, now = self.edges[(src_task, stream)]
        return st, (now() - values.born) * 1000.0

    def _stale(self, st: Any, age_ms: float, metas: list | None, n: int) -> None:
        p = st.policy
        st.dropped += n
        st.stale += n
        st.note(f"stale: {n} older than lifespan_ms={p.lifespan_ms:g} ({age_ms:.0f} ms)", STALE)
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
                st.missed(k)
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
        # Tuples made without their __init__ (a Python call, ~35 ns of ~130 a tuple):
        # the same two or four slots it sets, written here
        new = _new
        if metas is None:
            if self.basic and not self.collector.acking:
                for v in values:
                    t = new(Tuple)
                    t.values = v
                    t.source = source
                    try:
                        execute(t)
                    except Exception as exc:  # noqa: BLE001 - the tuple fails, the worker lives
                        self._on_error(exc, None, values, v)
                self.acked += n
            else:
                col = self.collector
                for v in values:
                    t = new(Tuple)
                    t.values = v
                    t.source = source
                    col.current = t
                    try:
                        execute(t)
                    except Exception as exc:  # noqa: BLE001
                        self._on_error(exc, t, values, v)
        elif self.basic:
            col = self.collector
            folder = col.acks
            fail = folder.fail
            acks = folder.acks
            get = acks.get
            failed = 0
            for v, m in zip(values, metas, strict=True):
                if m:
                    t = new(TrackedTuple)
                    t.meta = m
                    t.ack_val = 0
                else:
                    t = new(Tuple)
                t.values = v
                t.source = source
                col.current = t
                try:
                    execute(t)
                except Exception as exc:  # noqa: BLE001
                    failed += 1
                    self._uncaught_at(exc, values, v, failed - 1)
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
                if m:
                    t = new(TrackedTuple)
                    t.meta = m
                    t.ack_val = 0
                else:
                    t = new(Tuple)
                t.values = v
                t.source = source
                try:
                    execute(t)
                except Exception as exc:  # noqa: BLE001
                    self._on_error(exc, t, values, v)
        if stream != TICK_STREAM:
            self.consumed += n
        self.executed += n
        if self.basic and self.lane_keys and (src_task, stream) in self.lane_keys:
            self.queue.settle((src_task, stream), n)

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
                st.missed(len(values))
            st.executed += len(values)
            values = list(values)
        tb = TupleBatch(values, source, metas, col)
        n = len(values)
        try:
            self.obj.execute_batch(tb)
        except Exception as exc:  # noqa: BLE001 - the batch fails, the worker lives
            try:
                self._uncaught(exc)
            except BaseException:
                self.executed += len(tb._made) or n  # as their emits are counted
                raise
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
        if self.basic and self.lane_keys and (src_task, stream) in self.lane_keys:
            self.queue.settle((src_task, stream), n)

    def _uncaught_at(
        self, exc: Exception, values: list, row: Any, failed_before: int | None = None
    ) -> None:
        """`_uncaught` for the tuple of `row` in a batch of `values`: an exception that
        ends the task ends the batch too, and the tuples executed up to it (it included)
        are counted as executed, as their emits were (a run that failed at a batch's 19th
        tuple showed `emitted 18, executed 0`). The error path alone pays for it."""
        try:
            self._uncaught(exc)
        except BaseException:
            i = next((i for i, r in enumerate(values) if r is row), 0)
            self.executed += i + 1
            if failed_before is not None:  # a BasicBolt's batch: the rest were acked
                self.acked += i - failed_before
            raise

    def _on_error(self, exc: Exception, tup: Tuple | None, values: list, row: Any) -> None:
        self._uncaught_at(exc, values, row)
        if tup is not None and not self.basic:
            self._fail(tup, _error_text(exc))
            if self.lane_keys:  # a Bolt's lane tuple that raised is settled (failed)
                key = (tup.source.task, tup.source.stream)
                if key in self.lane_keys:
                    self.queue.settle(key, 1)
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


def _lane(values: Any, idx: tuple[int, ...], lanes: int) -> int:
    return lane_of(values[idx[0]] if len(idx) == 1 else tuple(values[j] for j in idx), lanes)


class _PoolCurrent:
    """A TupleBatch's collector on a pool thread: the tuple it iterates is the capture's
    current tuple (what recorded emits anchor to)."""

    __slots__ = ("_cap",)

    def __init__(self, cap: Any):
        self._cap = cap

    @property
    def current(self) -> Any:
        return self._cap.current

    @current.setter
    def current(self, t: Any) -> None:
        self._cap.current = t


def _with_ops(work: Any, pool: Any) -> Any:
    """`work()`'s result with the calls it recorded: (result or exception, ops)."""
    cap = pool.capture

    def run() -> tuple[Any, list]:
        cap.ops, cap.current = [], None
        try:
            r = work()
        except Exception as exc:  # noqa: BLE001 - settled as a failed batch
            r = exc
        return r, cap.ops

    return run


def _replay(col: Any, outcome: Any) -> None:
    """Replay a settle batch's recorded calls on the task's thread, each with the tuple
    it was made under as the current one."""
    if isinstance(outcome, BaseException):
        raise outcome
    _result, ops = outcome
    for real, args, kw, cur in ops:
        col.current = cur
        real(*args, **kw)
    col.current = None
