"""Executors: one per task, running Storm 2.0's bolt and spout loops as bounded turns.

An executor's loop is `begin`, `step` (one bounded turn) and `end`. By default a
worker's scheduler thread calls the steps of its executors in turns (`scheduler.py`);
`run` loops over `step` on a thread of the executor's own (`topology.executor.own.thread`
or `topology.worker.scheduler: threads`). An executor whose user code blocks keeps the
scheduler thread it blocked, which then runs only its loop.

This module holds what both loops share (lifecycle, statistics, error records, idling
under backpressure); `bolt_executor.py` and `spout_executor.py` hold the loops.
"""

from __future__ import annotations

import logging
import threading
import traceback
import weakref
from collections.abc import Mapping
from typing import Any

from ..errors import FailedException, ReportedFailedException, TopologyError
from ..logs import set_running
from ..tuple import SYSTEM_COMPONENT, Source
from . import wait
from .collector import Collector
from .context import TopologyContext
from .error_report import SHOWN, ErrorReport, report
from .plan import Plan
from .queue import ReceiveQueue
from .seams import TaskWorker
from .task_counts import TaskCounts

log = logging.getLogger("stormish.executor")
# What one loop turn (`step`) did: the caller idles on anything but WORK.
WORK, IDLE, HELD = 0, 1, 2
MAX_ERRORS_KEPT = 10
# Error records of all executors in this process change under it (the error path
# only): which errors a worker writes in full to the terminal is then exact.
_ERRORS_LOCK = threading.Lock()
# per worker: each distinct error written in full, and the task that wrote it
_WRITTEN: weakref.WeakKeyDictionary[Any, dict[tuple, int]] = weakref.WeakKeyDictionary()


class Executor:
    """What spout and bolt executors share: stats, errors, flush timing, idling."""

    is_spout = False

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
        self.thread: threading.Thread | None = None  # the thread running it
        self.scheduler: Any = None  # the Scheduler whose thread runs it, if one does
        self.begun = False  # prepare/open ran (on the thread that runs it)
        self.bp_wait = wait.from_config(self.conf, "backpressure")
        self.flush_every = self.conf["topology.batch.flush.interval.millis"] / 1000.0
        self.on_cycle = self.component in plan.on_cycle
        self.budget = self.conf["topology.cycle.drain.budget"]
        self.sources: dict[tuple[int, str], Source] = {}
        self.log_tag = f"{self.component}:{self.task}"  # stormish.logs: who logs or prints
        # inbound edges with a policy, by (src_task, stream): (health counters, the clock
        # its batches were stamped on); filled by the worker (stormish.edges)
        self.edges: dict[tuple[int, str], tuple[Any, Any]] = {}
        self.barrier_keys: set[tuple[int, str]] = set()  # mode="barrier" edges' (task, stream)
        self.counts = TaskCounts()  # statistics: executed, acked, ... (task_counts.py)
        self.bp_seconds = 0.0
        self.bp_since: float | None = None
        self.errors: list[ErrorReport] = []
        self.error_count = 0
        self.fatal: str | None = None
        self.fail_fast = bool(self.conf["topology.fail.fast"])
        # a call into its user code that has not returned past this (s; 0: never
        # reported) and since when, once reported (time.monotonic; runtime/stuck.py)
        self.stuck_limit = stuck_limit(self.conf)
        self.stuck_since: float | None = None
        self.done = False
        # loop iterations: what simulated-time settling reads (stormish.testing's
        # advance_time): two more turns mean a whole iteration ran after a given instant
        self.turns = 0
        self.idle = 0  # turns in a row without work (the wait strategies' counter)
        self.idle_wait: Any = None
        self.outside: Any = None  # the component's poll_outside, if it has one

    # -- statistics (read by the worker; the loops write `counts`) ----------------------
    @property
    def executed(self) -> int:
        return self.counts.executed

    @property
    def consumed(self) -> int:
        return self.counts.consumed

    @property
    def acked(self) -> int:
        return self.counts.acked

    @property
    def failed(self) -> int:
        return self.counts.failed

    @property
    def timed_out(self) -> int:
        return self.counts.timed_out

    @property
    def dead_lettered(self) -> int:
        return self.counts.dead_lettered

    @property
    def dropped_stale(self) -> int:
        return self.counts.dropped_stale

    @property
    def exec_seconds(self) -> float:
        return self.counts.exec_seconds

    @property
    def exec_hist(self) -> list[int]:
        return self.counts.exec_hist

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
            self.fail_fatally(exc)
        finally:
            self.done = True

    def fail_fatally(self, exc: BaseException) -> None:
        """The task ends: its error is recorded and the worker told."""
        rep = self._record_error(exc, "fatal")
        self.fatal = f"component {self.component!r} task {self.task}: {rep.headline}"
        self.worker.executor_failed(self)

    def stop(self) -> None:
        self.running = False
        self.queue.wake()

    def run(self) -> None:
        """The executor's loop on a thread of its own: Storm's loop, idling under the
        wait strategies between turns that found nothing to do."""
        set_running(self.log_tag)
        try:
            if not self.begin_when_wanted():
                return
            try:
                self.drive()
            finally:
                self.end()
        finally:
            set_running(None)  # thread ids are reused: no stale name for the next one

    def drive(self) -> None:
        """Turns until stopped, idling between turns that found nothing to do."""
        q, step, bp_wait, idle_wait = self.queue, self.step, self.bp_wait, self.idle_wait
        bp_q = q if self.is_spout else None
        while self.running:
            r = step()
            if r == IDLE:
                self.idle = idle_wait.idle(self.idle, q)
            elif r == HELD:
                self.idle = bp_wait.idle(self.idle, bp_q)

    def begin_when_wanted(self) -> bool:
        """Begin (prepare/open) on this thread; False when stopped first."""
        self.begin()
        return True

    def wants_to_begin(self) -> bool:
        """Whether `begin` may run now (a spout submitted inactive opens when activated)."""
        return True

    def begin(self) -> None:
        raise NotImplementedError

    def step(self) -> int:
        raise NotImplementedError

    def end(self) -> None:
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
        self._record_error(exc, "reported", traceback.extract_stack(limit=64))

    def _uncaught(self, exc: Exception) -> None:
        """An exception out of `execute`: recorded (the caller fails the tuple), or
        raised again to end the task when it will repeat on every tuple (a TopologyError:
        an emit that breaks the declared streams) or when `topology.fail.fast` is on."""
        if isinstance(exc, FailedException):  # failed on purpose: not an error
            if isinstance(exc, ReportedFailedException):
                self._record_error(exc, "execute")
            return
        if self.fail_fast or isinstance(exc, TopologyError):
            raise exc
        self._record_error(exc, "execute")

    def last_errors(self) -> tuple[str, ...]:
        return tuple(e.text for e in self.errors)

    def report_stuck(self, rep: ErrorReport, since: float) -> None:
        """From the stuck watch (runtime/stuck_watch.py): a call has not returned since
        `since`. Recorded and shown as an error; with fail-fast the worker fails with it
        (the run stops), as it does when an exception ends a task."""
        self.stuck_since = since
        self._keep(rep)
        if rep.kind == "stuck-fatal" and self.fatal is None:
            self.fatal = rep.headline  # it names the component and task
            self.worker.executor_failed(self)

    def _record_error(self, exc: BaseException, kind: str, stack: Any = ()) -> ErrorReport:
        rep = report(exc, kind, self.component, self.task, type(self.obj).__name__, stack)
        self._keep(rep)
        return rep

    def _keep(self, rep: ErrorReport) -> None:
        """Keep the last MAX_ERRORS_KEPT; write the first SHOWN of this component in
        this worker to the log in full (fatal and stuck ones always), and count the
        rest."""
        kind = rep.kind
        with _ERRORS_LOCK:
            self.error_count += 1
            if len(self.errors) >= MAX_ERRORS_KEPT:
                self.errors.pop(0)
            self.errors.append(rep)
            n = sum(
                ex.error_count
                for ex in self.worker.executors.values()
                if ex.component == self.component
            )
        if n <= SHOWN or kind not in ("execute", "reported"):
            key = (self.component, rep.error, rep.file, rep.line, kind)
            with _ERRORS_LOCK:
                written = _WRITTEN.setdefault(self.worker, {})
                first = written.setdefault(key, self.task)
            if first != self.task:  # the same error of another task: one line, no traceback
                log.error(
                    "component %r task %d: the same error as task %d: %s",
                    self.component, self.task, first, rep.headline,
                )  # fmt: skip
                return
            more = ""
            if n == SHOWN:
                more = (
                    f"\ncomponent {self.component!r}: further errors in worker "
                    f"{self.worker.index} are counted, not shown (statistics: errors, last_errors)"
                )
            log.error("component %r task %d: %s%s", self.component, self.task, rep.text, more)

    def _enter_bp(self, now: float) -> None:
        if self.bp_since is None:
            self.bp_since = now

    def _leave_bp(self, now: float) -> None:
        if self.bp_since is not None:
            self.bp_seconds += now - self.bp_since
            self.bp_since = None


def noop(*args: object) -> None:
    return None


def stuck_limit(conf: Mapping[str, Any]) -> float:
    """`topology.executor.stuck.secs`, unset: the message timeout (a call that long has
    timed out every tree it holds); 0: off."""
    v = conf.get("topology.executor.stuck.secs")
    return float(conf["topology.message.timeout.secs"] if v is None else v)
