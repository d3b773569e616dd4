"""Executors: one thread per task running Storm 2.0's bolt and spout loops.

Bolt loop: flush the pendingEmitQ first (stopping at the first refusal); while anything
remains parked, read no new input and idle under the backpressure wait strategy, except
on a cycle (below); otherwise consume everything queued, execute it, and idle under the
bolt wait strategy when there is nothing.

Spout loop: always drain the spout's own receive queue (acks, fails, resets, ticks): that
is what keeps spout -> acker -> spout from deadlocking. Call `next_tuple` only while the
pendingEmitQ is empty, the spout is active and not finished, and
`topology.max.spout.pending` is not reached.

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

import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from ..component import BasicBolt, Bolt
from ..tuple import SYSTEM_COMPONENT, TICK_STREAM, Source, TrackedTuple, Tuple, TupleBatch
from . import wait
from .acker import AckerBolt
from .plan import ACK_ACK, ACK_FAIL, ACK_RESET, Plan
from .rotating import RotatingMap

log = logging.getLogger("stormish.executor")
MAX_ERRORS_KEPT = 10


class Executor:
    """What spout and bolt executors share: stats, errors, flush timing, idling."""

    is_spout = False

    def __init__(
        self, plan: Plan, task: int, obj: Any, queue: Any, collector: Any, context: Any, worker: Any
    ):
        self.plan = plan
        self.task = task
        self.component = plan.task_component[task]
        self.obj = obj
        self.queue = queue
        self.collector = collector
        self.context = context
        self.worker = worker
        self.conf = plan.component_conf(self.component)
        self.clock = worker.clock
        self.running = True
        self.thread: threading.Thread | None = None
        self.bp_wait = wait.from_config(self.conf, "backpressure")
        self.flush_every = self.conf["topology.batch.flush.interval.millis"] / 1000.0
        self.on_cycle = self.component in plan.on_cycle
        self.budget = self.conf["topology.cycle.drain.budget"]
        self.sources: dict[tuple[int, str], Source] = {}
        # statistics
        self.executed = 0
        self.consumed = 0
        self.acked = 0
        self.failed = 0
        self.timed_out = 0
        self.exec_seconds = 0.0
        self.bp_seconds = 0.0
        self.bp_since: float | None = None
        self.errors: list[dict[str, Any]] = []
        self.error_count = 0
        self.fatal: str | None = None
        self.done = False

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self.thread = threading.Thread(
            target=self._main, name=f"{self.component}[{self.task}]", daemon=True
        )
        self.thread.start()

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # noqa: BLE001 - reported to the worker, never lost
            self.fatal = (
                f"component {self.component!r} task {self.task}: {type(exc).__name__}: {exc}"
            )
            self._record_error(exc, "fatal")
            self.worker.executor_failed(self)
        finally:
            self.done = True

    def stop(self) -> None:
        self.running = False
        self.queue.wake()

    def run(self) -> None:
        raise NotImplementedError

    # -- shared helpers -----------------------------------------------------------------------
    def source(self, task: int, stream: str) -> Source:
        src = self.sources.get((task, stream))
        if src is None:
            comp = self.plan.task_component.get(task, SYSTEM_COMPONENT)
            fields = self.plan.streams[comp].get(stream, ())
            src = self.sources[(task, stream)] = Source(comp, task, stream, fields)
        return src

    def report_error(self, exc: BaseException) -> None:
        self._record_error(exc, "reported")

    def _record_error(self, exc: BaseException, kind: str) -> None:
        self.error_count += 1
        if len(self.errors) >= MAX_ERRORS_KEPT:
            self.errors.pop(0)
        self.errors.append(
            {
                "kind": kind,
                "component": self.component,
                "task": self.task,
                "error": f"{type(exc).__name__}: {exc}",
                "trace": "".join(traceback.format_exception(exc))[-2000:],
                "time": time.time(),
            }
        )
        if self.error_count <= 5 or self.error_count % 1000 == 0:
            log.error(
                "component %r task %d %s error #%d: %s: %s",
                self.component,
                self.task,
                kind,
                self.error_count,
                type(exc).__name__,
                exc,
            )

    def _enter_bp(self, now: float) -> None:
        if self.bp_since is None:
            self.bp_since = now

    def _leave_bp(self, now: float) -> None:
        if self.bp_since is not None:
            self.bp_seconds += now - self.bp_since
            self.bp_since = None


class BoltExecutor(Executor):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.idle_wait = wait.from_config(self.conf, "bolt")
        self.is_acker = isinstance(self.obj, AckerBolt)
        self.basic = isinstance(self.obj, BasicBolt)
        self._bind()

    def _bind(self) -> None:
        obj, col = self.obj, self.collector
        col.basic = self.basic
        if not col.acking:
            obj.emit = col.emit
            obj.emit_many = col.emit_many
            obj.ack = self._count_ack
            obj.fail = self._count_fail
            obj.ack_batch = self._count_ack_batch
            obj.fail_batch = self._count_fail_batch
            obj.reset_timeout = _noop
        else:
            if self.basic:
                obj.emit, obj.emit_many = col.emit_basic_tracked, col.emit_many_basic_tracked
            else:
                obj.emit, obj.emit_many = col.emit_bolt_tracked, col.emit_many_bolt_tracked
            obj.ack = self._ack
            obj.fail = self._fail
            obj.ack_batch = self._ack_batch
            obj.fail_batch = self._fail_batch
            obj.reset_timeout = col.reset_timeout
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
        self.collector.ack(tup)

    def _ack_batch(self, batch: TupleBatch) -> None:
        self.acked += len(batch)
        self.collector.ack_batch(batch)

    def _fail_batch(self, batch: TupleBatch) -> None:
        self.failed += len(batch)
        self.collector.fail_batch(batch)

    def _fail(self, tup: Tuple) -> None:
        self.failed += 1
        self.collector.fail(tup)

    def run(self) -> None:
        self.obj.prepare(self.conf, self.context)
        try:
            self._loop()
        finally:
            self.collector.flush_all()
            self.obj.cleanup()

    def _loop(self) -> None:
        q, col, now = self.queue, self.collector, self.clock.now
        pending = col.pending
        if self.is_acker:
            execute = self._execute_raw
        elif type(self.obj).execute_batch is not Bolt.execute_batch:
            execute = self._execute_user_batch
        else:
            execute = self._execute_batch
        idle = 0
        next_flush = now() + self.flush_every
        while self.running:
            if pending and not col.flush_pending():
                t = now()
                self._enter_bp(t)
                drain = self.on_cycle and col.pending_count < self.budget and q.has_data()
                if self.on_cycle:
                    self.worker.cycle_congestion(self.task, col.pending_count * 2 > self.budget)
                if not drain:
                    idle = self.bp_wait.idle(idle)
                    continue
            elif self.bp_since is not None:
                self._leave_bp(now())
                if self.on_cycle:
                    self.worker.cycle_congestion(self.task, False)
                # what was emitted while parked may sit in partial outboxes: the next idle
                # spell must begin with a flush, or with no more input it sat for ever
                idle = 0
            batches = q.consume()
            if batches is not None:
                idle = 0
                t0 = now()
                for batch in batches:
                    execute(batch)
                t1 = now()
                self.exec_seconds += t1 - t0
                if t1 >= next_flush:
                    col.flush_all()
                    col.refresh_load()
                    next_flush = t1 + self.flush_every
            else:
                if idle == 0:
                    col.flush_all()
                    next_flush = now() + self.flush_every
                idle = self.idle_wait.idle(idle, q)

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
            ack, fail = col.ack, col.fail
            failed = 0
            for v, m in zip(values, metas, strict=True):
                t = TrackedTuple(v, source, m) if m else Tuple(v, source)
                col.current = t
                try:
                    execute(t)
                except Exception as exc:  # noqa: BLE001
                    failed += 1
                    self._record_error(exc, "execute")
                    fail(t)
                    continue
                ack(t)
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
            self._record_error(exc, "execute")
            if self.basic:
                self.failed += n
                if metas is not None:
                    col.fail_batch(tb)
        else:
            if self.basic:
                self.acked += n
                if metas is not None:
                    col.ack_batch(tb)
        col.current = None
        if stream != TICK_STREAM:
            self.consumed += n
        self.executed += n

    def _on_error(self, exc: Exception, tup: Tuple | None) -> None:
        self._record_error(exc, "execute")
        if tup is not None and not self.basic:
            self.obj.fail(tup)
        elif tup is not None:
            self.collector.fail(tup)
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


class SpoutExecutor(Executor):
    is_spout = True
    BURST = 128  # next_tuple calls between checks of the spout's own queue

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.idle_wait = wait.from_config(self.conf, "spout")
        self.max_pending = self.conf["topology.max.spout.pending"]
        self.timeout = float(self.conf["topology.message.timeout.secs"])
        self.inflight = RotatingMap(3)
        self.finished = False
        self.active = True
        self.feeds_cycle = self.component in self.plan.feeds_cycle
        self._now = self.clock.now
        self.complete_seconds = 0.0
        self.completed = 0
        self._bind()

    def _bind(self) -> None:
        obj, col = self.obj, self.collector
        obj.emit = col.emit_spout_tracked if col.acking else col.emit
        obj.emit_many = col.emit_many_spout_tracked if col.acking else col.emit_many
        obj.emit_direct = col.emit_direct
        obj.report_error = self.report_error
        obj.finish = self.finish
        col.reliable = self._track

    def finish(self) -> None:
        self.finished = True

    def _track(self, root: int, msg_id: Any, rows: int = 1) -> None:
        """`rows`: the spout tuples of the tree (emit_many); acked/failed count them, as
        `emitted` does, while max.spout.pending counts trees (message ids), as Storm's."""
        self.inflight.put_new(root, (msg_id, self._now(), rows))

    def is_done(self) -> bool:
        return self.finished and len(self.inflight) == 0

    def run(self) -> None:
        self.obj.open(self.conf, self.context)
        try:
            self._loop()
        finally:
            self.collector.flush_all()
            self.obj.close()

    def _loop(self) -> None:
        q, col, now = self.queue, self.collector, self.clock.now
        pending, acked_on_emit = col.pending, col.acked_on_emit
        next_tuple: Callable[[], None] = self.obj.next_tuple
        max_pending, inflight, max_burst = self.max_pending, self.inflight, self.BURST
        burst = 1
        rotate_every = max(self.timeout / 2.0, 0.01)
        t = now()
        next_rotate = t + rotate_every
        next_flush = t + self.flush_every
        idle = 0
        while self.running:
            batches = q.consume()
            if batches is not None:
                for batch in batches:
                    self._control(batch)
            t = now()
            if t >= next_rotate:
                self._expire(inflight.rotate())
                next_rotate = t + rotate_every
            if t >= next_flush:
                col.flush_all()
                col.refresh_load()
                next_flush = t + self.flush_every
            if pending and not col.flush_pending():
                self._enter_bp(t)
                idle = self.bp_wait.idle(idle, q)
                continue
            if self.bp_since is not None:
                self._leave_bp(t)
            if (
                self.finished
                or not self.active
                or (max_pending is not None and len(inflight) >= max_pending)
                or (self.feeds_cycle and self.worker.cycle_congested)
            ):
                if idle == 0:
                    col.flush_all()
                idle = self.idle_wait.idle(idle, q)
                continue
            before = col.transferred + col.pending_count + col.buffered()
            calls = 0
            if max_pending is None:
                for calls in range(1, burst + 1):  # noqa: B007 - calls is read after
                    next_tuple()
                    if pending:
                        break
            else:
                for calls in range(1, burst + 1):  # noqa: B007
                    next_tuple()
                    if pending or len(inflight) >= max_pending:
                        break
            if acked_on_emit:
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
                burst = 1
                if produced or idle == 0:
                    col.flush_all()
                    idle = 0
                idle = self.idle_wait.idle(idle, q)
            else:
                idle = 0
                if burst < max_burst:
                    burst = min(burst * 2, max_burst)

    def _ack_on_emit(self) -> None:
        ids = self.collector.acked_on_emit[:]
        self.collector.acked_on_emit.clear()
        ack = self.obj.ack
        for msg_id in ids:
            ack(msg_id)
        self.acked += len(ids)

    def _control(self, batch: tuple) -> None:
        src_task, stream, values, _ = batch
        n = len(values)
        if stream != TICK_STREAM:
            self.consumed += n
        self.executed += n
        if stream == ACK_ACK:
            t = self.clock.now()
            for (root,) in values:
                entry = self.inflight.pop(root)
                if entry is not None:
                    self.completed += 1
                    self.complete_seconds += t - entry[1]
                    self.acked += entry[2]
                    self.obj.ack(entry[0])
        elif stream == ACK_FAIL:
            for (root,) in values:
                entry = self.inflight.pop(root)
                if entry is not None:
                    self.failed += entry[2]
                    self.obj.fail(entry[0])
        elif stream == ACK_RESET:
            for (root,) in values:
                self.inflight.touch(root)

    def _expire(self, dead: dict[int, Any]) -> None:
        for msg_id, _, rows in dead.values():
            self.timed_out += rows
            self.failed += rows
            self.obj.fail(msg_id)


def _noop(*args: Any) -> None:
    return None
