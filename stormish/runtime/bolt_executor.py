"""The bolt executor: Storm 2.0's bolt loop, one bounded turn per `step` (run by the
worker's scheduler thread, or by a thread of its own: executor.py).

How the input runs is chosen once, when the task begins (runtime/execution/: per tuple,
the bolt's own batches, settle batches, concurrent lanes); the loop only flushes what
waits to be emitted, takes input, hands each batch to the chosen execution, and idles.

Bolt loop: flush the pendingEmitQ first (stopping at the first refusal); while anything
remains parked, read no new input and idle under the backpressure wait strategy, except
on a cycle (below); otherwise consume up to the queue's budget, execute it, and idle under
the bolt wait strategy when there is nothing. Execution stops at the first tuple after
which emits parked, as Storm's (BoltExecutor consumes with the exit condition
tillNoPendingEmits, which JCQueue.consume checks before each tuple): the rest of the take
goes back to the head of the queue (`ReceiveQueue.put_back`), in order, for a turn after
the pendingEmitQ has flushed. What a bolt parks is so one tuple's emits beyond what it
had, not a whole take's: a 1:1000 fan-out into a slow sink parked 463k tuples (670 MB).

A bolt that defines `Bolt.on_turn` is called first in every turn that is not parked, and
is parked as under backpressure while it returns True (a client's queue is full:
stormish.kafka.KafkaSink).

Cycles (beyond Storm, whose STORM-3637 topologies deadlock): an executor on a cycle of
the topology graph keeps consuming input while parked, as long as its pendingEmitQ holds
fewer than `topology.cycle.drain.budget` tuples; a parked executor that stops draining is
what closes the wait cycle (checked before each tuple too: such a drain stops at the
tuple that filled the budget). While such an executor holds more than half its budget, the
spouts upstream of the cycle stop calling `next_tuple`, in every worker (the congestion
is announced to the others: Worker.cycle_congestion), so a cycle under sustained
overload is not fed faster than it drains. The budget alone does not keep a cycle that
multiplies its tuples (fan-out on the cycle) moving: the tuples already inside can
outgrow every executor's budget, each then parked on the next. Across workers, a cycle
executor whose budget is full sends past the remote flag of a task on its cycle, into
that task's overflowQ, which never blocks (transport/remote.py CycleTarget); what the
cycle holds is bounded by what the spouts injected times its fan-out, which
`topology.max.spout.pending` bounds.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Any

from ..component import BasicBolt, bolt_hook, prepare_bolt
from ..tuple import TICK_STREAM
from . import wait
from .acker import AckerBolt
from .batcher import Batcher
from .emitters import BasicCollector, UntrackedCollector
from .execution import Execution, choose
from .execution.accounting import BASIC_SETTLES, Accounts, basic_refusals, settle_calls
from .execution.base import rows_part
from .execution.per_tuple import PerTuple
from .execution.screen import Screen
from .executor import HELD, IDLE, WORK, Executor, noop
from .lane_pool import LanePool
from .process_latency import ProcessLatency
from .stats import EXECUTE_BUCKETS

if TYPE_CHECKING:
    from .collector import Collector
    from .context import TopologyContext
    from .plan import Plan
    from .queue import ReceiveQueue
    from .seams import TaskWorker

# How long a bolt's turn may go on taking input (each take at most the queue's budget):
# long enough that a turn's fixed cost is nothing, short enough that the other executors
# of a cooperative scheduler wait at most about this long.
TURN_SECONDS = 0.002
TURN_TAKES = 16


class BoltExecutor(Executor):
    def __init__(
        self,
        plan: Plan,
        task: int,
        obj: Any,
        queue: ReceiveQueue,
        collector: Collector,
        context: TopologyContext,
        worker: TaskWorker,
    ):
        super().__init__(plan, task, obj, queue, collector, context, worker)
        self.idle_wait = wait.from_config(self.conf, "bolt")
        self.is_acker = isinstance(self.obj, AckerBolt)
        basic = isinstance(self.obj, BasicBolt)
        # ordered_lanes edges into this task, by (src_task, stream): (key indices, lanes)
        self.lane_keys: dict[tuple[int, str], tuple[tuple[int, ...], int]] = {}
        # batch settle (stormish.settle): the bolt sets batch_size
        size = getattr(self.obj, "batch_size", None)
        self.batcher: Batcher | None = None
        if size is not None and not self.is_acker:
            wait_ms = getattr(self.obj, "batch_max_wait_ms", None)
            self.batcher = Batcher(size, None if wait_ms is None else wait_ms / 1000.0)
        # Storm's process latency, matched per batch (runtime/process_latency.py); the
        # acker's own inputs are never acked
        self.process: ProcessLatency | None = None
        if not self.is_acker:
            self.process = ProcessLatency(float(self.conf["topology.message.timeout.secs"]))
        # a Bolt settles its tuples itself and may keep them (a settle batch's wait too)
        self._keeps = not basic or self.batcher is not None
        # the engine settles a lane tuple as it executes it, or the bolt as it acks it
        self.accounts = Accounts(
            self.counts, self.lane_keys, self.queue.settle, basic or self.batcher is not None,
            self._uncaught,
        )  # fmt: skip
        self.screen = Screen(self.edges, self.queue, self.collector, self.counts, self.source)
        self.execution: Execution | None = None  # chosen in begin()
        self.pool: LanePool | None = None  # concurrent lanes (topology.lanes.concurrency)
        # Bolt.on_turn, where the bolt defines it: called before each turn takes input
        self._on_turn = bolt_hook(self.obj, "on_turn")
        self._holds_work = bolt_hook(self.obj, "holds_work")
        self.holding = False  # Bolt.holds_work's last answer (Worker.quiescence reads it)
        self._holds_seen = 0  # what it had executed when it was asked
        # parked emits stop the input at this many tuples: 1 (any), or the cycle drain
        # budget while an executor on a cycle drains parked (step sets it each turn)
        self.park_limit = 1
        self._bind()

    def stops(self) -> bool:
        """Whether what the pendingEmitQ holds stops executing input (called only when it
        is not empty): always, except while draining on a cycle, below its budget."""
        return self.collector.parked.count >= self.park_limit

    def _bind(self) -> None:
        obj, col = self.obj, self.collector
        obj.emit, obj.emit_many = col.emit, col.emit_many  # the role's collector
        if isinstance(col, (UntrackedCollector, BasicCollector)):
            obj.emit = col.bound_emit()
        for name, call in settle_calls(self.counts, col.acks if col.acking else None).items():
            setattr(obj, name, call)
        if isinstance(obj, BasicBolt):
            why = getattr(obj, "settles_itself", None) or BASIC_SETTLES
            for name, call in basic_refusals(self.component, why).items():
                setattr(obj, name, call)
        obj.reset_timeout = col.acks.reset if col.acking else noop
        obj.emit_direct = col.emit_direct
        obj.emit_tasks = col.emit_tasks
        obj.report_error = self.report_error
        self.fail_tuple = settle_calls(self.counts, col.acks)["fail"]

    def begin(self) -> None:
        """Everything before the first loop turn, on the thread that runs the loop."""
        prepare_bolt(self.obj, self.conf, self.context)
        # work that arrives outside the receive queue (a multilang child's messages):
        # `poll_outside()` handles what has come and says whether anything had
        self.outside = getattr(self.obj, "poll_outside", None)
        self.idle = 0
        self.next_flush = self.clock.now() + self.flush_every
        if self.lane_keys and not self.accounts.on_execute:
            self.accounts.settle_by_bolt(self.obj)  # a Bolt settles as it acks or fails
        self.execution = choose(self)
        self.pool = self.execution.pool
        # root metas (ack_folder.py) from local spouts, read as they are: only by a
        # BasicBolt's PerTuple loop with nothing before it (no edge policy, lanes, batch
        # settle, multilang child); for any other consumer the spout's flush writes
        # them out (Collector.flush)
        ex = self.execution
        self.queue.takes_roots = (
            ex.__class__ is PerTuple
            and ex.basic
            and not self.edges
            and self.outside is None
            and self.batcher is None
            and not self.is_acker
        )

    def lane_pool(self) -> LanePool | None:
        """The task's pool of concurrent lanes, if it has ordered_lanes edges and
        topology.lanes.concurrency > 1; the bolt's calls are recorded on its threads."""
        conc = self.conf["topology.lanes.concurrency"]
        if not self.lane_keys or conc <= 1:
            return None
        pool = LanePool(conc, self.queue.wake, f"{self.component}[{self.task}]")
        pool.bind(self.obj)
        return pool

    def finish_pool(self, pool: LanePool) -> None:
        """At the end: what the lanes are running finishes and is replayed."""
        while pool.pending:
            if not pool.completed():
                self.queue.wait(0.05)
        pool.stop(1.0)

    def end(self) -> None:
        if self.execution is not None:
            self.execution.end()
            self._settled_outside()
        self.collector.flush_all()
        self.obj.cleanup()

    def step(self) -> int:
        """One turn of the bolt loop: WORK (it executed input), IDLE (nothing to do) or
        HELD (parked under backpressure). The caller idles on anything but WORK and
        counts `idle` up; a step resets it when work comes."""
        self.turns += 1
        col = self.collector
        now = self.clock.now
        limit = 1  # parked emits stop the input at once, unless a cycle drains (below)
        if col.pending and not col.flush_pending():
            t = now()
            self._enter_bp(t)
            q = self.queue
            drain = self.on_cycle and col.pending_count < self.budget and q.has_data()
            if self.on_cycle:
                self.worker.cycle_congestion(self.task, col.pending_count * 2 > self.budget)
            if not drain:
                return HELD
            limit = self.budget  # and stops at the tuple that fills the budget
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
        self.park_limit = limit
        q = self.queue
        outside = self.outside
        if outside is not None and outside():  # a multilang child's messages
            self._settled_outside()  # its acks and fails came outside an execute
            self.idle = 0
            if col.pending or not q.has_data():
                return WORK
        ex = self.execution
        assert ex is not None
        replayed = self.pool.completed() if self.pool is not None else 0
        if replayed:
            self._settled_outside()
        batches = q.consume()
        if self.edges:
            batches = self._screen(batches)
        if replayed and batches is None:
            self.idle = 0
            return WORK
        bt = ex.batcher
        if bt is not None and bt.waiting and ex.flush_due(batches is None):
            self._settled_outside()
            self.idle = 0
            if batches is None:
                return WORK
        if batches is not None:
            self.idle = 0
            execute = ex.run
            counts = self.counts
            hist, bounds = counts.exec_hist, EXECUTE_BUCKETS
            process, keeps, tracked_only = self.process, self._keeps, col.acking
            t1 = now()
            end = t1 + TURN_SECONDS
            takes = TURN_TAKES  # a bound on a fake clock too, where time stands still
            stops = self.stops
            parked = False
            while True:
                # time per batch, as executed counts: they move together
                for k, batch in enumerate(batches):
                    t0 = t1
                    stale = counts.dropped_stale
                    left = execute(batch)
                    t1 = now()
                    counts.exec_seconds += t1 - t0
                    n = len(batch[2]) if left is None else left  # rows executed
                    if n:
                        hist[bisect_right(bounds, (t1 - t0) / n)] += n
                        if process is not None:  # per batch, never per tuple
                            process.executed(
                                t0,
                                t1,
                                n - (counts.dropped_stale - stale),
                                counts.acked + counts.failed,
                                keeps
                                and batch[1] != TICK_STREAM
                                and (batch[3] is not None or not tracked_only),
                            )
                    # emits parked: the rest of the take waits at the head of the queue
                    if left is not None or (col.pending and k + 1 < len(batches) and stops()):
                        self._put_back(batches, k, left)
                        parked = True
                        break
                # Another take while the turn lasts: a take is bounded (what a task holds
                # unseen stays bounded), a turn by time. With one take a turn, a bolt fed
                # 8 tuples for each its upstream takes (a split) got an eighth of the
                # throughput it needed and its queue filled (backpressure, overflow).
                takes -= 1
                if parked or t1 >= end or not takes or col.pending or not self.running:
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

    def _put_back(self, batches: list, k: int, left: int | None) -> None:
        """Batch k of a take stopped at row `left` (None: it ran whole) because emits
        parked: its rest and the batches after it go back to the head of the queue, not
        counted as arrived at an edge yet (they are when taken again)."""
        rest = batches[k + 1 :]
        if left is not None:
            rest.insert(0, rows_part(batches[k], left))
        if rest:
            if self.edges:
                self.screen.returned(rest)
            self.queue.put_back(rest)

    def _screen(self, batches: list | None) -> list | None:
        """Edges with a policy (execution/screen.py); with concurrent lanes, the batches
        of ordered_lanes edges go to the pool here."""
        screen = self.screen
        if screen.lost():
            self.idle = 0
        if batches is None:
            return None
        screen.arrived(batches)
        divert = self.execution.divert  # type: ignore[union-attr]  # begun
        return batches if divert is None else divert(batches)

    def owes(self) -> bool:
        """Bolt.holds_work said True at its last `on_turn`, or the bolt executed tuples
        since it was asked (it may have handed them to its thread: the answer is stale
        until its next turn; read from a control thread, so one counter, one flag)."""
        return self._holds_work is not None and (
            self.holding or self.counts.executed != self._holds_seen
        )

    def _turn_held(self) -> bool:
        """Bolt.on_turn; what it settled goes out with this turn's flush (an idle turn
        flushes only when it follows work, so it counts as work here)."""
        counts = self.counts
        settled = counts.acked + counts.failed
        held = self._on_turn()  # type: ignore[misc]  # set: step() checked
        if self._holds_work is not None:
            self._holds_seen = self.counts.executed
            self.holding = bool(self._holds_work())
        if counts.acked + counts.failed != settled:
            self._settled_outside()
            self.idle = 0
            if held:
                self.collector.flush_all()
        elif self.collector.buffered():
            # it emitted without settling (acking off, a thread's results): flush as
            # after work, or those emits sat in partial outboxes for good
            self.idle = 0
            if held:
                self.collector.flush_all()
        return held

    def _settled_outside(self) -> None:
        """Tuples settled outside the loop's executes (runtime/process_latency.py)."""
        if self.process is not None:
            self.process.outside(self.clock.now(), self.counts.acked + self.counts.failed)
