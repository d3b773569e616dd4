"""A running topology: its workers, completion detection and final statistics.

Completion of a finite topology: every spout has called finish() and has no tuple tree
in flight, every executor is idle (empty queue, outboxes and pendingEmitQ), every tuple
published has been consumed (or dropped, counted), and the same holds in two snapshots
taken one poll apart with no counter moving in between. Counters only grow, so two equal
snapshots mean nothing moved at the instant between them. With worker processes each
snapshot asks the workers one after another, and the second round starts after the first
ended, so each worker's quiet interval covers the instant between the rounds.

A worker process that was restarted lost what it held and starts its counters at zero,
so published == consumed can no longer be proven; the run is then complete when every
spout is done (with acking on: every tree acked or failed and replayed) and nothing
moves between the two snapshots.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import ConfigError, Interrupted, WorkerError
from ..runtime import gctune
from ..runtime.acker import AckerBolt
from ..runtime.nudge import Nudge
from ..runtime.plan import Plan, build_plan
from ..runtime.stats import TopologyStatistics, aggregate
from ..runtime.status import TopologyStatus
from ..runtime.worker import Worker
from ..topology import Topology
from .forkserver import mark

POLL = 0.005
# While a topology is busy, completion is asked about less and less often (up to every
# POLL_BUSY_MAX s): each snapshot wakes every worker's control thread, and at 5 ms that
# cost a run on two cores ~9% of a core and latency in the workers it woke.
POLL_BUSY_MAX = 0.05
# The first look after the start comes this soon and the back-off grows from it: a short
# run (a test, a 10-sentence word count) is over in a few ms. When its spouts had
# finished by the first look, the next came 10 ms on (2 workers: complete 18 ms after the
# start, against 7 when they had not; STORMISH_START_TRACE). A long run pays ~4 looks more.
POLL_FIRST = 0.001
# How long a stop waits for each worker's executors (a bolt stuck in I/O) before it
# abandons them; the final statistics' `error` then names them.
STOP_WAIT = 10.0


class WorkerView(Protocol):
    """What a running topology asks of each of its workers, wherever it runs: in this
    process (`Worker`), a process of the local cluster (`WorkerHandle`), or a process a
    supervisor runs for nimbus (`ClusterWorker`)."""

    index: int

    def quiescence(self) -> dict[str, Any]: ...
    def stats_snapshot(self) -> tuple[list, dict]: ...
    def failure(self) -> str | None: ...
    def set_active(self, active: bool) -> None: ...
    def end_of_input(self) -> int: ...
    def stop(self, timeout: float = ...) -> list[str]: ...
    def results(self) -> dict[str, list[tuple[int, Any]]]: ...


class WorkerSet(Protocol):
    """The processes of a topology as a whole: the local cluster's `WorkerGroup` or
    nimbus's `Deployment` (their workers restart; their slots are freed at the end)."""

    restarts: int
    active: bool

    @property
    def handles(self) -> Sequence[Any]:
        """One per worker, by index: its `index` and `restarts`."""
        ...

    def restart(self, index: int) -> None: ...
    def close(self) -> None: ...


class RunningTopology:
    def __init__(
        self,
        topology: Topology,
        plan: Plan,
        workers: Sequence[WorkerView],
        nudge: Nudge | None = None,
    ):
        self.topology = topology
        self.name = topology.name
        self.plan = plan
        self.workers = workers
        self.started = time.monotonic()
        self.ended = False
        self.status = TopologyStatus.RUNNING
        self.error: str | None = None
        self._final: TopologyStatistics | None = None
        # a look and the end exclude each other: a kill on another thread closes what
        # a look asks through (a waiter got "ZMQError: Socket operation on non-socket")
        self._lock = threading.RLock()
        self.group: WorkerSet | None = None  # when the workers are processes
        self.gc_held = False  # in-process workers: GC thresholds held (gctune)
        self.spouts_finished = False  # as the last completion snapshot saw it
        self.input_ended = False  # every spout called finish (trees may be in flight)
        self.all_idle = False  # every queue empty and what was sent, consumed
        # the completion rule's state across poll_complete calls: when it looks next
        self._completion: Completion | None = None
        self._interval = POLL_FIRST / 1.5  # the first back-off step makes it POLL_FIRST
        self._next_look = 0.0
        # the workers' word that their spouts are done: look at once (runtime/nudge.py)
        self._nudge = nudge

    @classmethod
    def start(
        cls,
        topology: Topology,
        extra: Mapping[str, Any],
        clock: Clock | None = None,
        active: bool = True,
    ) -> RunningTopology:
        """`active=False`: submitted inactive, no spout is opened until `set_active(True)`."""
        conf = topology.validate(extra)
        plan = build_plan(topology, conf, AckerBolt())
        mark("planned")
        if plan.workers > 1:
            if clock is not None:
                raise ConfigError(
                    f"config key 'topology.workers' is {plan.workers} for topology "
                    f"{topology.name!r}: a fake clock only drives a single in-process worker"
                )
            from .workers import WorkerGroup

            group = WorkerGroup(topology, plan, conf)
            # after the group forked its fork server from this process (a fork keeps
            # every descriptor): only the workers get the write end, in their requests
            try:
                nudge = Nudge()
            except BaseException:
                group.close()
                raise
            group.nudge_fd = nudge.write_fd
            try:
                running = cls(topology, plan, group.start(active), nudge)
            except BaseException:
                nudge.close()  # start closed the group
                raise
            running.group = group
            return running
        worker = Worker(plan, 0, clock or SYSTEM_CLOCK)
        # a fake clock's run is driven by its test, which looks when it advances time
        own: Nudge | None = Nudge() if clock is None else None
        worker.on_spouts_done = own.tell if own is not None else None
        held = gctune.hold(conf["topology.worker.gc.threshold"])
        try:
            worker.set_active(active)
            worker.start()
        except BaseException:
            if held:
                gctune.release()
            if own is not None:
                own.close()
            raise
        running = cls(topology, plan, [worker], own)
        running.gc_held = held
        return running

    def restart_worker(self, index: int) -> None:
        """Start worker process `index` again (it died or was killed); what a supervisor
        does. Only topologies running on worker processes have any to restart."""
        if self.group is None:
            raise WorkerError(f"topology {self.name!r} runs in this process: no worker to restart")
        self.group.restart(index)

    # -- completion -------------------------------------------------------------------------
    def _snapshot(self, finished: bool = True) -> tuple[bool, tuple[int, ...]]:
        """`finished=False`: quiet is enough, spouts need not have finished. Records in
        `spouts_finished` whether every spout has (the end is near: look more often)."""
        qs = [w.quiescence() for w in self.workers]
        self.spouts_finished = all(q["spouts_done"] for q in qs)
        # every spout called finish, yet trees are in flight: what windows hold
        self.input_ended = all(q.get("spouts_ended", q["spouts_done"]) for q in qs)
        done = all((q["spouts_done"] or not finished) and q["idle"] for q in qs)
        sent = sum(q["transferred"] for q in qs)
        got = sum(q["consumed"] for q in qs) + sum(q["dropped"] for q in qs)
        key = tuple(x for q in qs for x in (q["transferred"], q["consumed"], q["dropped"]))
        # a barrier edge's remainder short of n is held, not moving: end of input frees it
        held = sum(q.get("held", 0) for q in qs)
        self.all_idle = all(q["idle"] for q in qs) and sent == got + held
        if self.group is not None and self.group.restarts:
            return done, key
        return done and sent == got, key

    def check_failed(self) -> None:
        for w in self.workers:
            why = w.failure()
            if why is not None:
                self.error = why
                if not why.startswith(f"worker {w.index}"):  # a process handle says it
                    why = f"worker {w.index}: {why}"
                raise WorkerError(f"topology {self.name!r} {why}")

    def wait_complete(self, timeout: float) -> TopologyStatistics:
        if not self.poll_complete(timeout):
            raise TimeoutError(
                f"topology {self.name!r} did not complete within {timeout}s: {self._progress()}"
            )
        return self.statistics()

    def poll_complete(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the completion rule; True once the topology ended
        (complete, or already ended otherwise). The rule and its back-off carry over from
        one call to the next: `stormish run` calls this every 50 ms, and a fresh rule per
        call looked five times in each (a request to every worker each time, ~100 a
        second), where the back-off asks for one look every 50 ms while busy. A timeout
        costs nothing more (`wait_complete` adds the progress report)."""
        deadline = time.monotonic() + timeout
        rule = self._completion
        if rule is None:
            rule = self._completion = Completion(self)
        while True:
            if self.ended:
                return True
            now = time.monotonic()
            if now >= self._next_look:
                with self._lock:
                    if self.ended:  # killed while this thread waited for the lock
                        return True
                    try:
                        done = rule.observe()
                    except Interrupted:
                        # a kill (another thread) or a signal cut the look short: the
                        # kill ends the run; until then, no look
                        done = False
                    except WorkerError:
                        self.finish(TopologyStatus.FAILED)
                        raise
                    if done:
                        mark("complete")
                        self.finish(TopologyStatus.COMPLETE)
                        return True
                self._interval = next_poll(self._interval, rule.quiet, self.spouts_finished)
                now = time.monotonic()
                self._next_look = now + self._interval
            if now >= deadline:
                return False
            wait = min(self._next_look, deadline) - now
            nudge = self._nudge
            if nudge is None:
                time.sleep(wait)
            elif nudge.wait(wait):  # a worker's spouts are done: look now
                self._interval = POLL_FIRST / 1.5
                self._next_look = time.monotonic()

    def wait_quiet(self, timeout: float) -> None:
        """Block until nothing moves: the completion rule without "every spout has
        finished" (every queue, outbox and pendingEmitQ empty, published == consumed, in
        two equal snapshots one poll apart). For tests (stormish.testing.tracked_wait):
        what a spout emits afterwards is new work. Raises WorkerError or TimeoutError."""
        deadline = time.monotonic() + timeout
        rule = Completion(self, finished=False)
        while True:
            with self._lock:  # as poll_complete's looks: never after the end stopped it
                try:
                    if self.ended or rule.observe():
                        return
                except Interrupted:
                    pass  # a kill is taking over: the next pass sees the run ended
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"topology {self.name!r} did not become quiet within {timeout}s: "
                    f"{self._progress()}"
                )
            time.sleep(POLL)

    def _progress(self) -> str:
        s = self.statistics()
        counts = ", ".join(
            f"{c.component}: executed {c.executed}, queued {c.receive_population}, pending "
            f"{c.pending_emits}"
            for c in s.components.values()
        )
        hint = self._window_wait(s)
        return f"{counts}; {hint}" if hint else counts

    def _window_wait(self, s: TopologyStatistics) -> str:
        """The wait a finite run with windows cannot leave: a windowed bolt acks a tuple
        only once its last window closed, a window closes at the end of input, and the
        input ends when every spout called finish() or finish_input(). A spout that
        calls finish() only once all its trees are acked waits for windows that wait
        for it (the run timed out with counts that said nothing of it)."""
        if self.input_ended:
            return ""
        windowed = [  # a windowed bolt has a window length or a session gap; this
            # layer does not import the windowing package (tests/unit/test_layers.py)
            name
            for name, spec in self.topology.components.items()
            if getattr(spec.obj, "window_length", None) is not None
            or getattr(spec.obj, "session_gap", None) is not None
        ]
        waiting = [
            f"{c.component} ({n:,} tuples unacked)"
            for c in s.components.values()
            if c.kind == "spout" and (n := c.emitted - c.acked - c.failed - c.timed_out) > 0
        ]
        if not (windowed and waiting):
            return ""
        return (
            f"spouts {', '.join(waiting)} have not ended their input, and windowed bolts "
            f"({', '.join(windowed)}) ack a tuple only once its window closes, which the end "
            "of input does: a spout that calls finish() only once its tuples are acked "
            "waits for good; call finish_input() once every tuple is emitted"
        )

    def is_complete(self) -> bool:
        ok, key = self._snapshot()
        if not ok:
            return False
        time.sleep(POLL)
        ok2, key2 = self._snapshot()
        return ok2 and key == key2

    # -- control ------------------------------------------------------------------------------
    def set_active(self, active: bool) -> None:
        if self.group is not None:
            self.group.active = active  # a restarted worker starts as the others are
        for w in self.workers:
            w.set_active(active)

    def interrupt(self) -> None:
        """Cut short a look under way (quiescence, statistics: a worker that does not
        answer held it for the request's timeout, 30 s): what a signal handler calls
        before the run is killed, and `kill` itself. Looks after it fail at once
        (Interrupted) until `kill` takes over; a stop is never cut. A plain attribute
        (no lock): a signal handler may run while this thread holds any lock."""
        control = getattr(self.group, "control", None)
        if control is not None:
            control.interrupted = True

    def kill(self, wait_secs: float = 0.0) -> TopologyStatistics:
        """Deactivate, wait up to `wait_secs` for quiet, stop. Under the lock a look by
        another thread takes (`poll_complete`): a run that ends by itself meanwhile is
        not asked anything after its workers stopped (the kill raised "died during
        active"), and a worker that died or stopped answering does not stop the kill: a
        look under way is cut short, and a worker that does not answer the deactivation
        within STOP_WAIT is asked nothing more and killed at the stop."""
        self.interrupt()  # a look on another thread lets go of the lock at once
        with self._lock:
            control = getattr(self.group, "control", None)
            if control is not None:
                control.interrupted = False  # the kill's own looks (a signal may cut them)
            if self.ended:
                return self.statistics()
            try:
                deactivate = getattr(self.group, "deactivate_all", None)
                if deactivate is not None:  # side by side
                    deactivate(STOP_WAIT)
                else:
                    self.set_active(False)
                if wait_secs > 0:
                    deadline = time.monotonic() + wait_secs
                    while time.monotonic() < deadline and not self.is_complete():
                        time.sleep(POLL)
            except Interrupted:
                pass  # signalled again while it waited for quiet: stop now
            except WorkerError as exc:
                if self.error is None:  # the final statistics say it
                    self.error = str(exc)
            return self.finish(TopologyStatus.KILLED)

    def finish(self, status: TopologyStatus) -> TopologyStatistics:
        with self._lock:
            if self.ended:
                return self.statistics()
            stuck = []
            try:
                stop_all = getattr(self.group, "stop_all", None)  # local worker processes
                if stop_all is not None:
                    stuck = stop_all(STOP_WAIT)
                else:
                    for w in self.workers:
                        stuck += w.stop(STOP_WAIT)
                if stuck and self.error is None:  # before the final statistics, which say it
                    self.error = (
                        f"executors still busy at stop, abandoned after {STOP_WAIT:g}s: "
                        f"{', '.join(stuck)}"
                    )
                self._final = self._collect(status)
            finally:
                if self.group is not None:
                    self.group.close()
                if self._nudge is not None:  # after the workers: none writes to it now
                    self._nudge.close()
                if self.gc_held:
                    self.gc_held = False
                    gctune.release()
            self.ended = True
            self.status = status
            return self._final

    def results(self) -> dict[str, list[Any]]:
        """Per component, the `result()` of each task in task order (after the stop)."""
        merged: dict[str, list[tuple[int, Any]]] = {}
        for w in self.workers:
            for comp, parts in w.results().items():
                merged.setdefault(comp, []).extend(parts)
        return {c: [r for _, r in sorted(parts, key=lambda p: p[0])] for c, parts in merged.items()}

    # -- statistics ------------------------------------------------------------------------------
    def statistics(self) -> TopologyStatistics:
        if self._final is not None:
            return self._final
        return self._collect(self.status)

    def _collect(self, status: TopologyStatus) -> TopologyStatistics:
        tasks = {}
        links: dict[str, Any] = {}
        for w in self.workers:
            task_list, link_map = w.stats_snapshot()
            for t in task_list:
                tasks[t.task] = t
            links.update(link_map)
        return TopologyStatistics(
            name=self.name,
            status=status,
            uptime_seconds=time.monotonic() - self.started,
            workers=len(self.workers),
            tasks=dict(sorted(tasks.items())),
            components=aggregate(tasks.values()),
            links=links,
            error=self.error,
        )


def next_poll(interval: float, quiet: bool, spouts_finished: bool) -> float:
    """How long completion waits before it looks again. Busy: less and less often (up to
    POLL_BUSY_MAX). Once every spout has finished, what is left is what the bounded
    queues hold: every other poll, so that the end of a long run is seen within ~10 ms
    rather than up to POLL_BUSY_MAX (~25 ms on average, whole command and spread); no
    later than the back-off would, so a run whose spouts finished before the first looks
    (a short one) is looked at again within ms, not 10 ms on."""
    if quiet:
        return POLL
    grown = min(interval * 1.5, POLL_BUSY_MAX)
    if spouts_finished:
        return min(grown, 2 * POLL)
    return grown


class Completion:
    """Storm's completion rule for a finite topology, the one the local cluster and
    nimbus both apply: every spout has finished (with `finished`), every queue, outbox
    and pendingEmitQ is empty, what was published was consumed or dropped, and two
    observations one poll apart saw the same counts. `observe` looks once (it raises
    the WorkerError of a dead worker) and says whether the topology is complete."""

    def __init__(self, running: RunningTopology, finished: bool = True):
        self.running = running
        self.finished = finished
        self.last: tuple[int, ...] | None = None
        self.quiet = False  # the last observation found nothing moving
        self.still_key: tuple[int, ...] | None = None  # input ended, idle: these counts
        self.ended_at: tuple[int, ...] | None = None  # the counts end_of_input was sent at

    def observe(self) -> bool:
        self.running.check_failed()
        ok, key = self.running._snapshot(self.finished)
        done = ok and key == self.last
        self.last = key if ok else None
        self.quiet = ok
        if self.finished and self._end_input(key):
            self.last = None  # two fresh observations after what the windows do
            return False
        return done

    def _end_input(self, key: tuple[int, ...]) -> bool:
        """Every spout has ended its input and nothing moves (two equal observations,
        every queue empty): trees may be in flight that windowed bolts hold until time
        passes, and an unreliable run's last windows were never run. Time goes to its
        end (the workers give windowed bolts a last tick), once per still state: what
        the windows then emit moves the counts, and if a later windowed bolt holds that,
        the next still state ends its input too. True when some bolt was told (the run
        is not complete before it has carried that out)."""
        running = self.running
        settled = running.input_ended and running.all_idle
        still = settled and key == self.still_key
        self.still_key = key if settled else None
        if not still or key == self.ended_at:
            return False
        self.ended_at = key
        return sum(w.end_of_input() for w in running.workers) > 0
