"""The spout executor: Storm 2.0's spout loop, one bounded turn per `step` (run by the
worker's scheduler thread, or by a thread of its own: executor.py).

Always drain the spout's own receive queue (acks, fails, resets, ticks): that is what
keeps spout -> acker -> spout from deadlocking. Call `next_tuple` only while the
pendingEmitQ is empty, the spout is active and not finished, and
`topology.max.spout.pending` is not reached. A spout upstream of a congested cycle
pauses too (see bolt_executor).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..component import Spout
from ..errors import TopologyError
from ..failure import FAILED, TIMED_OUT, Failure
from ..tuple import TICK_STREAM
from . import wait
from .emitters import SpoutCollector, UntrackedCollector
from .executor import HELD, IDLE, WORK, Executor
from .inflight import InFlight, Tree, parts
from .plan import ACK_ACK, ACK_FAIL, ACK_RESET
from .stats import COMPLETE_BUCKETS

if TYPE_CHECKING:
    from .collector import Collector
    from .context import TopologyContext
    from .plan import Plan
    from .queue import ReceiveQueue
    from .seams import Batch, TaskWorker


class SpoutExecutor(Executor):
    is_spout = True
    BURST = 128  # next_tuple calls between checks of the spout's own queue

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
        self.idle_wait = wait.from_config(self.conf, "spout")
        self.max_pending = self.conf["topology.max.spout.pending"]
        if isinstance(self.collector, UntrackedCollector):
            # acking off: nothing is ever in flight, and the loop's check per next_tuple
            # call (a len() of the in-flight map) would cost the default bound ~40%
            self.max_pending = None
        self.timeout = float(self.conf["topology.message.timeout.secs"])
        # Storm's topology.enable.message.timeouts false (for tests): trees never expire
        # here; rotation only trims the complete-latency stamps (Storm sends such a
        # spout no tick, so its pending map never rotates)
        self.timeouts = bool(self.conf.get("topology.enable.message.timeouts", True))
        col = self.collector
        self.inflight = InFlight(3, col.acks.root_step if isinstance(col, SpoutCollector) else 1)
        self.finished = False
        self.input_finished = False
        self.told_done = False  # the worker heard it is done (Worker.spout_settled)
        # Activation is asked for from any thread (`wanted_active`, by the worker) and
        # carried out on this one (`active`, with the spout's activate/deactivate), as
        # every spout callback is: user code never runs on two threads at once.
        self.wanted_active = True
        self.active = False
        self.feeds_cycle = self.component in self.plan.feeds_cycle
        self.complete_seconds = 0.0
        self.completed = 0
        self.complete_hist = [0] * (len(COMPLETE_BUCKETS) + 1)  # see stats.COMPLETE_BUCKETS
        # dead letters: failures per message id, counted only with topology.max.replays
        self.max_replays = self.conf["topology.max.replays"]
        self.fail_counts: dict[Any, int] = {}
        self.fail_takes_reason = _takes_reason(self.obj.fail)
        # a spout that extends its source's own deadline (JetStream's in_progress)
        reset = self.obj.timeout_reset
        self._timeout_reset = (
            None if getattr(reset, "__func__", None) is Spout.timeout_reset else reset
        )
        self._bind()

    def _bind(self) -> None:
        obj, col = self.obj, self.collector
        obj.emit, obj.emit_many, obj.emit_direct = col.emit, col.emit_many, col.emit_direct
        if isinstance(col, UntrackedCollector):
            obj.emit = col.bound_emit()
        obj.emit_tasks = col.emit_tasks
        obj.report_error = self.report_error
        obj.finish = self.finish
        obj.finish_input = self.finish_input
        obj.dead_letter = self.dead_letter
        obj.advance_epoch = self._advance_epoch
        if isinstance(col, SpoutCollector):
            col.reliable = self._track if self.max_replays is None else self._track_values
            # a tree of one row is recorded by the emit closure itself (inflight.py)
            col.inflight_head = self.inflight.head if self.max_replays is None else None
            obj.emit = col.bound_emit()

    def finish(self) -> None:
        self.finished = True

    def _advance_epoch(self) -> None:
        """Flush what this spout emitted first: it was published in the epoch that ends."""
        self.collector.flush_all()
        self.worker.advance_epoch(broadcast=True)

    def finish_input(self) -> None:
        """No new tuples will come; failed ones may still be replayed (next_tuple is
        still called). The completion rule ends windows' time once every spout has."""
        if not self.input_finished:
            self.input_finished = True
            self.worker.spout_settled()

    def dead_letter(
        self,
        msg_id: Any,
        values: Any,
        error: str | None = None,
        failures: int = 1,
        stream: str = "default",
    ) -> None:
        """The spout gave a record up by its own rule: on to its `__dead_letter` stream."""
        self.counts.dead_lettered += 1
        self.collector.emit_dead_letter(
            (msg_id, stream, tuple(values), self.component, error, failures)
        )

    def _track(
        self, root: int, msg_id: Any, rows: int = 1, values: Any = None, stream: str = ""
    ) -> None:
        """`rows`: the spout tuples of the tree (emit_many); acked/failed count them, as
        `emitted` does, while max.spout.pending counts trees (message ids), as Storm's."""
        self.inflight.put(root, msg_id if rows == 1 else Tree(msg_id, rows, None, stream))

    def _track_values(
        self, root: int, msg_id: Any, rows: int = 1, values: Any = None, stream: str = ""
    ) -> None:
        """With topology.max.replays: the values too, for the dead letter."""
        self.inflight.put(root, Tree(msg_id, rows, values, stream))

    @property
    def pending_trees(self) -> int:
        """Trees in flight (what topology.max.spout.pending bounds)."""
        return len(self.inflight)

    def is_done(self) -> bool:
        return self.finished and len(self.inflight) == 0

    def set_active(self, active: bool) -> None:
        """From any thread: the spout's loop calls activate/deactivate on its own."""
        self.wanted_active = active
        self.queue.wake()

    def begin_when_wanted(self) -> bool:
        # Submitted inactive: nothing is opened (so nothing is read or emitted) until the
        # topology is first activated.
        while self.running and not self.wanted_active:
            self.queue.wait(0.1)
        if not self.running:
            return False
        self.begin()
        return True

    def wants_to_begin(self) -> bool:
        return self.wanted_active

    def begin(self) -> None:
        self.obj.open(self.conf, self.context)
        # work that arrives outside the receive queue (a multilang child's messages)
        self.outside = getattr(self.obj, "poll_outside", None)
        col = self.collector
        self._acked_on_emit = col.acked_on_emit if isinstance(col, UntrackedCollector) else []
        self._next_tuple: Callable[[], None] = self.obj.next_tuple
        self.burst = 1
        self.rotate_every = max(self.timeout / 2.0, 0.01)
        # stamps of complete latency (inflight.py): the next root of the spout's counter
        self._next_root = col.acks.next_root if isinstance(col, SpoutCollector) else None
        t = self.clock.now()
        self.next_rotate = t + self.rotate_every
        self.next_flush = t + self.flush_every
        self.idle = 0

    def end(self) -> None:
        self.collector.flush_all()
        self.obj.close()

    def _follow_activation(self) -> None:
        """Storm calls activate() once the spout is open and the topology active (at start
        too), deactivate() when it is deactivated, always on the spout's thread."""
        while self.active is not self.wanted_active:
            self.active = want = self.wanted_active
            (self.obj.activate if want else self.obj.deactivate)()

    def step(self) -> int:
        """One turn of the spout loop: its own queue first (acks, fails, resets), then a
        burst of next_tuple calls when it may emit. WORK, IDLE or HELD, as a bolt's."""
        self.turns += 1
        q, col = self.queue, self.collector
        inflight = self.inflight
        t = self.clock.now()
        if self._next_root is not None:  # what this turn emits, its ack/fail callbacks too
            inflight.stamp(self._next_root(), t)
        batches = q.consume()
        if batches is not None:
            for batch in batches:
                self._control(batch)
        if self.active is not self.wanted_active:
            self._follow_activation()
        outside = self.outside
        if outside is not None and outside():  # a multilang child's messages
            self.idle = 0
        if t >= self.next_rotate:
            if self.timeouts:
                self._expire(inflight.rotate(t, 2.0 * self.timeout + 1.0))
            else:
                inflight.trim_stamps(t, 2.0 * self.timeout + 1.0)
            self.next_rotate = t + self.rotate_every
        if t >= self.next_flush:
            col.flush_all()
            col.refresh_load()
            self.next_flush = t + self.flush_every
        pending = col.pending
        if pending and not col.flush_pending():
            self._enter_bp(t)
            return HELD
        if self.bp_since is not None:
            self._leave_bp(t)
        max_pending = self.max_pending
        head = inflight.head
        if (
            self.finished
            or not self.active
            or (max_pending is not None and len(head) + inflight.older_n >= max_pending)
            or (self.feeds_cycle and self.worker.cycle_congested)
        ):
            if self.idle == 0:
                col.flush_all()
            if self.finished and not self.told_done and not (len(head) + inflight.older_n):
                self.told_done = True  # its last tree is done: the run looks now
                self.worker.spout_settled()
            return IDLE
        before = col.transferred + col.pending_count + col.buffered()
        calls = 0
        burst = self.burst
        next_tuple = self._next_tuple
        if max_pending is None:
            for calls in range(1, burst + 1):  # noqa: B007 - calls is read after
                next_tuple()
                if pending:
                    break
        else:
            max_head = max_pending - inflight.older_n  # older buckets only shrink here
            for calls in range(1, burst + 1):  # noqa: B007
                next_tuple()
                if pending or len(head) >= max_head:
                    break
        if self._acked_on_emit:
            self._ack_on_emit()
        # Storm idles the spout after a next_tuple that emitted nothing. Checked per
        # burst (a check per call costs the const spout ~20%): fewer tuples than
        # calls means some calls were empty. A spout that only sometimes has data (a
        # paced or polling source) must not spin: a spinning thread holds the GIL and
        # every consumer it wakes then waits a whole switch interval for it.
        # What it did emit is published before the wait (and the empty streak
        # restarts), or it would sit in the outboxes until the flush interval.
        # The burst adapts: it doubles (up to BURST) while every call emitted and
        # falls back to one call after a burst with empty calls, so a spout with
        # data runs long bursts and a paced one is not called 128 times for nothing
        # on every wake-up (that alone made an idle-ish worker use a whole core).
        produced = col.transferred + col.pending_count + col.buffered() - before
        if produced < calls:
            self.burst = 1
            if produced or self.idle == 0:
                col.flush_all()
                self.idle = 0
            return IDLE
        self.idle = 0
        if burst < self.BURST:
            self.burst = min(burst * 2, self.BURST)
        return WORK

    def _ack_on_emit(self) -> None:
        acked_on_emit = self.collector.acked_on_emit  # type: ignore[attr-defined]
        ids = acked_on_emit[:]
        acked_on_emit.clear()
        ack = self.obj.ack
        for msg_id in ids:
            ack(msg_id)
        self.counts.acked += len(ids)

    def _control(self, batch: Batch) -> None:
        src_task, stream, values, _ = batch
        if stream == ACK_ACK:
            for (roots,) in values:  # one list of completed roots per acker batch
                self._completed(roots)
        elif stream == ACK_FAIL:
            for root, why in values:
                entry = self.inflight.pop(root)
                if entry is not None:
                    self._failed(entry, FAILED, why)
        elif stream == ACK_RESET:
            reset = self._timeout_reset
            for (root,) in values:
                entry = self.inflight.renew(root)
                if entry is not None and reset is not None:
                    reset(parts(entry)[0])
        # counted once the spout's ack/fail ran (as a bolt counts after execute): the
        # completion rule (published == consumed) then covers what those callbacks do
        n = len(values)
        tc = self.counts
        if stream != TICK_STREAM:
            tc.consumed += n
        tc.executed += n

    def _completed(self, roots: list[int]) -> None:
        """Trees the acker found complete; a root timed out or failed already comes too
        late and is not found. Counted first (what the spout's ack sees is up to date),
        then the spout's ack per tree, if it keeps one."""
        inflight = self.inflight
        entries, found = inflight.pop_many(roots)
        if not entries:
            return
        done = len(entries)
        self.completed += done
        self.complete_seconds += inflight.latency(
            found, self.clock.now(), self.complete_hist, COMPLETE_BUCKETS
        )
        self.counts.acked += done + inflight.extra_rows(entries)
        counts = self.fail_counts
        ack = self.obj.ack
        if getattr(ack, "__func__", None) is Spout.ack:
            ack = None  # the spout keeps no ack of its own: a call per tree less
        if counts or ack is not None:
            for entry in entries:
                msg_id = entry.msg_id if entry.__class__ is Tree else entry
                if counts:
                    counts.pop(msg_id, None)
                if ack is not None:
                    ack(msg_id)

    def _expire(self, dead: dict[int, Any]) -> None:
        for entry in dead.values():
            self.counts.timed_out += parts(entry)[1]
            self._failed(entry, TIMED_OUT, None)

    def _failed(self, entry: Any, reason: str, why: Any) -> None:
        """Count the failure; past `topology.max.replays` failures of one message id,
        dead-letter it (final); tell the spout, with the reason when its fail takes one."""
        msg_id, rows, values, stream = parts(entry)
        self.counts.failed += rows
        component, error = (why[0], why[1]) if why else (None, None)
        if why and len(why) > 2:  # an edge's policy let one of its tuples go
            reason = why[2]
        failures, dead = 1, False
        if self.max_replays is not None:
            try:
                failures = self.fail_counts.get(msg_id, 0) + 1
            except TypeError:
                raise TopologyError(
                    f"spout {self.component!r}: topology.max.replays counts failures per "
                    f"message id, which must be hashable; got {type(msg_id).__name__}"
                ) from None
            if failures >= self.max_replays:
                dead = True
                self.fail_counts.pop(msg_id, None)
                self.counts.dead_lettered += rows
                self.collector.emit_dead_letter(
                    (msg_id, stream, values, component, error, failures)
                )
            else:
                self.fail_counts[msg_id] = failures
        if self.fail_takes_reason:
            self.obj.fail(msg_id, Failure(reason, component, error, failures, dead))
        else:
            self.obj.fail(msg_id)


def _takes_reason(fail: Callable[..., Any]) -> bool:
    """Whether a spout's `fail` accepts a second argument (the Failure)."""
    try:
        params = list(inspect.signature(fail).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2
