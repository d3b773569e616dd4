"""A worker: the executors of one topology's tasks on this process, and their wiring.

The worker builds one receive queue per local task, one collector per task whose outboxes
point at local queues or at remote targets (supplied by the transport), starts its
executors (by default on one scheduler thread, `scheduler.py`; a thread each for those
with `topology.executor.own.thread`, or for all under `topology.worker.scheduler:
threads`) plus a timer thread for ticks, and answers the cluster's questions: is it
quiescent, what are its statistics, did an executor die.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import cloudpickle

from .. import config as _config
from .. import pickling
from ..clock import SYSTEM_CLOCK, Clock, ComponentClock
from ..component import BasicBolt
from ..plugins import DATA_ENV, RESTART_ENV
from ..transport.remote import CycleTarget, RemoteTarget
from ..transport.wakeup import FdWakeup, Wakeup
from ..tuple import DEAD_LETTER_STREAM, END_OF_INPUT, TICK_STREAM
from . import wait
from .acker import AckerBolt, rotation_period
from .bolt_executor import BoltExecutor
from .channel import EdgeChannel, EdgeStats, LaneChannel, LanePolicy, Throttled
from .context import task_context
from .credits import (
    ReceiverCredits,
    SenderCredit,
    WorkerCredits,
    initial_credits,
    share_of,
)
from .cycle_target import LocalCycleTarget
from .emitters import make_collector
from .error_report import ErrorReport, engine_failure
from .executor import Executor
from .fanout import guard_for
from .health import HealthEvents
from .modes import (
    BarrierChannel,
    EpochChannel,
    LatchedChannel,
    Latching,
    LatchWriter,
    latch_path,
)
from .plan import ACKER, Plan, reaches, successors
from .queue import ReceiveQueue
from .scheduler import Scheduler, Watchdog
from .spout_executor import SpoutExecutor
from .stats import TaskStats
from .stuck_watch import StuckWatch
from .ticks import TickSchedule
from .typecheck import checked_emits

if TYPE_CHECKING:
    from ..transport.link import WorkerLink

TICK_TASK = -1  # Storm's Constants.SYSTEM_TASK_ID: the source task of a tick tuple
EPOCH_TIMER = -1  # the tick schedule's entry for topology.epoch.millis (no task)
debug_log = logging.getLogger("stormish.debug")


class Worker:
    def __init__(
        self,
        plan: Plan,
        index: int = 0,
        clock: Clock = SYSTEM_CLOCK,
        remote_target: Callable[[int], Any] | None = None,
        blobs: Mapping[str, bytes] | None = None,
    ):
        self.plan = plan
        self.index = index
        self.clock = clock
        self.started_at = time.time()  # this incarnation's mark in its tasks' statistics
        self.local_tasks = set(plan.worker_tasks(index))
        # each component's own queue size and batch (component config wins)
        confs = {n: plan.component_conf(n) for n in plan.components}
        remote_fed = self._remote_fed(plan)
        self.queues = {
            t: ReceiveQueue(
                (cap := confs[plan.task_component[t]][_config.QUEUE]),
                remote_reserve=cap // 2 if t in remote_fed else 0,
            )
            for t in sorted(self.local_tasks)
        }
        targets: dict[int, Any] = {}
        for t in plan.task_component:
            if t in self.queues:
                targets[t] = self.queues[t]
            elif remote_target is not None:
                targets[t] = remote_target(t)
        self.targets = targets
        self.link: WorkerLink | None = None  # the ZeroMQ link when the topology has several workers
        # the run's word that every spout here is done (nudge.py): `Nudge.tell` in this
        # process, a write to this process's copy of the pipe in a worker process
        self.on_spouts_done: Callable[[], None] | None = None
        self._eoi_consumed: dict[int, int] = {}  # tick bolts told END_OF_INPUT: consumed then
        self._link_wakeup: FdWakeup | None = None  # the scheduler's, while it serves the link
        self.failed: list[Executor] = []
        self._failed_event = threading.Event()
        # cycle congestion (cycle_congestion): this worker's congested cycle tasks, and
        # whether another worker announced one of its own (remote_cycle); the spouts
        # feeding a cycle read `cycle_congested`, set under the lock from both
        self._congested: set[int] = set()
        self._remote_congested = False
        self._cycle_lock = threading.Lock()
        self.cycle_congested = False
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        self.schedulers: list[Scheduler] = []
        self._watchdog: Watchdog | None = None
        self._stuck_watch: StuckWatch | None = None
        blobs = blobs or {n: pickling.dumps(s.obj) for n, s in plan.components.items()}
        self.executors: dict[int, Executor] = {}
        for t in sorted(self.local_tasks):
            batch = emit_batch(plan, plan.task_component[t], confs)
            self.executors[t] = self._make_executor(t, blobs, batch)
        self.health_events = (
            HealthEvents(index) if plan.conf["topology.edge.health.events"] else None
        )
        self.edge_stats: list[EdgeStats] = self._wire_edges()
        self.credits = self._wire_credits()
        self.cycle_targets = self._wire_cycles()
        self._wire_fanout()
        # previous_tick edges: the epoch this worker is in (topology.epoch.millis, a
        # spout's advance_epoch here or in another worker)
        self.epoch = 0
        self._epoch_lock = threading.Lock()
        self.epoch_edges = any(
            isinstance(ch, EpochChannel) for q in self.queues.values() for ch in q.chan_list
        )

    def _wire_edges(self) -> list[EdgeStats]:
        """Edges with a policy (stormish.edges): a channel at each local destination task
        for dropping ones, counters for all, and the clock each sender stamps batches
        with where an age is checked (the topology clock within this worker, the wall
        clock towards others: their monotonic clocks are not ours)."""
        plan, local = self.plan, self.local_tasks
        out: list[EdgeStats] = []
        events = self.health_events
        for t, ex in self.executors.items():
            q = ex.queue
            for sub in plan.components[ex.component].subscriptions:
                keys = [(u, sub.stream) for u in plan.tasks[sub.source]]
                if sub.grouping == "lanes":
                    assert sub.lanes is not None  # ordered_lanes always sets it
                    lp = LanePolicy(tuple(sub.fields), sub.lanes.lanes, sub.lanes.max_in_flight)
                    st = EdgeStats(sub.source, sub.stream, t, lp)  # type: ignore[arg-type]
                    st.capacity = q.capacity
                    st.events = events
                    out.append(st)
                    q.add_channel(keys, LaneChannel(lp, st, q.capacity))
                    fields = plan.streams[sub.source][sub.stream]
                    idx = tuple(fields.index(f) for f in sub.fields)
                    for k in keys:
                        ex.edges[k] = (st, self.clock.now)
                        ex.lane_keys[k] = (idx, sub.lanes.lanes)  # type: ignore[attr-defined]
                    continue
                p = sub.policy
                if p is None:
                    continue
                st = EdgeStats(sub.source, sub.stream, t, p)
                st.capacity = p.capacity or q.capacity
                st.events = events if p.emit_health_events else None
                out.append(st)
                if p.mode == "latched":
                    q.add_channel(keys, LatchedChannel(p, st, q.capacity))
                elif p.mode == "barrier":
                    q.add_channel(keys, BarrierChannel(p, st, q.capacity))
                    ex.barrier_keys.update(keys)
                elif p.mode == "previous_tick":
                    q.add_channel(keys, EpochChannel(p, st, q.capacity))
                elif p.channel:
                    ch = EdgeChannel(p, st, p.capacity or q.capacity)
                    if p.overflow == "fail" and plan.consumers(ex.component, DEAD_LETTER_STREAM):
                        ch.rejected = []  # someone reads this bolt's dead letters
                    q.add_channel(keys, ch)
                for k in keys:
                    ex.edges[k] = (st, self.clock.now if k[0] in local else time.time)
        self._wire_latching()
        by_edge = {(st.task, st.source, st.stream): st for st in out}
        throttles: dict[tuple[str, str, str], float] = {
            (n, sub.source, sub.stream): sub.policy.throttle
            for n, spec in plan.components.items()
            for sub in spec.subscriptions
            if sub.policy is not None and sub.policy.throttle is not None
        }
        for ex in self.executors.values():
            for ob in ex.collector.outboxes:
                if ob.stamp is True:
                    ob.stamp = self.clock.now if ob.task in local else time.time
                th = throttles.get((plan.task_component[ob.task], ex.component, ob.stream))
                if th is not None and ob.task in local:
                    ob.target = Throttled(
                        ob.target,
                        th,
                        self.clock.now,
                        by_edge.get((ob.task, ex.component, ob.stream)),
                    )
        return out

    def _remote_fed(self, plan: Plan) -> set[int]:
        """Local tasks that tuples from other workers may reach: their queues keep half
        free of local producers (ReceiveQueue.local_limit). A quarter was too little for
        a split's take (with 32,768-tuple queues, 4,096 sentences: 16k words for the
        other worker in one burst): 2-worker word count, remote tasks flagged 0.5-0.9 s
        of a 3 s run, with half 0.03-0.13 s."""
        if plan.workers < 2:
            return set()
        remote = set(plan.task_component) - self.local_tasks
        out = set()
        for t in self.local_tasks:
            spec = plan.components[plan.task_component[t]]
            anywhere = spec.is_spout or isinstance(spec.obj, AckerBolt)  # acks, from anywhere
            ups = (u for s in spec.subscriptions for u in plan.tasks[s.source])
            if anywhere or any(u in remote for u in ups):
                out.add(t)
        return out

    def _make_executor(self, task: int, blobs: Mapping[str, bytes], batch: int) -> Executor:
        plan = self.plan
        name = plan.task_component[task]
        spec = plan.components[name]
        obj = cloudpickle.loads(blobs[name])
        col = make_collector(
            plan,
            task,
            self.targets,
            self.local_tasks,
            batch,
            random.Random(hash((plan.name, task)) ^ random.getrandbits(64)),
            basic=isinstance(obj, BasicBolt),
        )
        ctx = task_context(
            plan, task, ComponentClock(self.clock, self._stop), self.queues[task].wake
        )
        cls = SpoutExecutor if spec.is_spout else BoltExecutor
        ex = cls(plan, task, obj, self.queues[task], col, ctx, self)
        _debug_emits(ex)
        return ex

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """The helper threads first, the executors' threads last: a started scheduler
        runs its spouts at once and holds the GIL, so every thread started after it
        waited a switch interval or two to say it was running (a busy 2-worker run's
        start took 20-24 ms, against 7 ms when the spouts had little to do)."""
        conf = self.plan.conf
        if conf["topology.worker.scheduler"] == "threads":
            own, shared = list(self.executors.values()), []
        else:
            own = [ex for ex in self.executors.values() if ex.conf["topology.executor.own.thread"]]
            shared = [ex for ex in self.executors.values() if ex not in own]
        first: Scheduler | None = None
        if shared:
            # with a link, the scheduler serves it (WorkerLink.serve): one poll waits for
            # its sockets and this wakeup alike
            wakeup = Wakeup() if self.link is None else FdWakeup()
            waits = [w for ex in shared for w in (ex.idle_wait, ex.bp_wait)]
            park_s = min(wait.park_seconds(ex.idle_wait) for ex in shared)
            held_s = min(wait.park_seconds(ex.bp_wait) for ex in shared)
            spin = min(wait.spin_count(w) for w in waits)

            def make(executors: list[Executor]) -> Scheduler:
                n = len(self.schedulers)
                name = f"worker-{self.index}-scheduler" + (f"-{n}" if n else "")
                return Scheduler(executors, wakeup, park_s, spin, name, held_park_s=held_s)

            first = make(shared)
            if self.link is not None:
                assert isinstance(wakeup, FdWakeup)
                self.link.serve(wakeup)
                first.link = self.link
                self._link_wakeup = wakeup
            self.schedulers.append(first)
            limit = conf["topology.scheduler.blocking.millis"] / 1000.0
            # the watchdog moves blocked executors, and lends a served link during long
            # turns (scheduler.LEND_AFTER); a scheduler not yet started is between turns
            if (limit > 0 and len(shared) > 1) or self.link is not None:
                self._watchdog = Watchdog(self.schedulers, limit, make)
                self._watchdog.start()
        if self.latch_writer is not None:
            self.latch_writer.start()
        self._stuck_watch = StuckWatch(
            self.plan.name, list(self.executors.values()), self.schedulers
        )
        self._stuck_watch.start()
        # the schedule starts now, not when the timer thread first runs
        sched = TickSchedule(self._tick_freqs(), self.clock.now())
        self._timer = threading.Thread(
            target=self._timer_main, args=(sched,), name="worker-timer", daemon=True
        )
        self._timer.start()
        try:
            for ex in own:
                ex.start()
            if first is not None:
                first.start()
        except BaseException:
            self.stop(0.0)  # the helpers above, and what started, end with the failure
            raise

    def stop(self, timeout: float = 10.0) -> list[str]:
        """Stop every executor (close/cleanup run on their threads); returns the names of
        executors that did not stop in time (a bolt stuck in I/O, say). A thread known
        to be stuck in user code (runtime/stuck_watch.py) is not waited for: it is a
        daemon thread, abandoned, and the process may exit under it."""
        self._stop.set()
        for ex in self.executors.values():
            ex.stop()
        held = {ex.thread for ex in self.executors.values() if ex.stuck_since is not None}
        stuck = []
        deadline = time.monotonic() + timeout
        for ex in self.executors.values():
            if ex.thread is not None:
                if ex.thread not in held:
                    ex.thread.join(max(0.0, deadline - time.monotonic()))
                if ex.thread.is_alive():
                    note = _stuck_note(ex)
                    stuck.append(f"{ex.component}[{ex.task}]{note}")
        if self._stuck_watch is not None:
            self._stuck_watch.close()
        if self.latch_writer is not None:
            self.latch_writer.close()
        if self._watchdog is not None:
            self._watchdog.stop.set()
            self._watchdog.thread.join(1.0)
        if self._timer is not None:
            self._timer.join(1.0)
        if self.link is not None:
            self.link.stop()
        if self._link_wakeup is not None:
            self._link_wakeup.close()
        return stuck

    def link_stats(self) -> dict[str, Any]:
        if self.link is None:
            return {}
        stats = self.link.statistics()
        # tuples this worker's cycle executors placed past a flag or a full queue (cycle targets)
        stats["cycle_past_flag"] = sum(c.past_flag for c in self.cycle_targets)
        return {f"worker-{self.index}": stats}

    def set_active(self, active: bool) -> None:
        """Asked from a control thread; each spout activates on its own thread. Called
        before `start`, it makes the spouts start inactive (not even opened)."""
        for ex in self.executors.values():
            if isinstance(ex, SpoutExecutor):
                ex.set_active(active)

    def _wire_fanout(self) -> None:
        """Components with a `fail` edge (into a task of this worker, or on credit into
        another's): their emits on the streams that feed one are all or nothing
        (runtime/fanout.py); the others' emits stay as they were bound."""
        for ex in self.executors.values():
            guard = guard_for(ex, self.queues)
            if guard is None:
                continue
            obj, col = ex.obj, ex.collector
            obj.emit = guard.wrap(col.emit, 1)
            obj.emit_many = guard.wrap(col.emit_many, 1)
            obj.emit_direct = guard.wrap(col.emit_direct, 2)
            _debug_emits(ex)

    def _wire_credits(self) -> WorkerCredits:
        """`fail` edges between workers (runtime/credits.py): each such channel here sets
        room aside for its senders in other workers, and each outbox of ours into one
        elsewhere holds the credit that worker set aside for it (a SenderCredit target,
        which the fan-out guard spends). Nothing for any other edge."""
        plan, local = self.plan, self.local_tasks
        out = WorkerCredits()
        for q in self.queues.values():
            for ch in q.chan_list:
                if ch.__class__ is not EdgeChannel or ch.policy.overflow != "fail":
                    continue
                assert isinstance(ch, EdgeChannel)
                srcs = sorted(s for (s, _), c in q.channels.items() if c is ch)
                remote = {s: plan.assignment[s] for s in srcs if s not in local}
                if remote:
                    grants = initial_credits(ch.capacity, srcs, remote)
                    ch.credits = ReceiverCredits(grants, share_of(ch.capacity, srcs))
                    ch.reserved += ch.credits.start(ch.reserved_by)
                    out.inbound.append((q, ch, remote))
        fails = {
            (n, sub.source, sub.stream): sub.policy
            for n, spec in plan.components.items()
            for sub in spec.subscriptions
            if sub.policy is not None and sub.policy.overflow == "fail" and sub.policy.channel
        }
        if not fails:
            return out
        for ex in self.executors.values():
            for ob in ex.collector.outboxes:
                dest = ob.task
                p = fails.get((plan.task_component[dest], ex.component, ob.stream))
                if p is None or dest in local:
                    continue
                name = plan.task_component[dest]
                cap = p.capacity or plan.component_conf(name)[_config.QUEUE]
                srcs = plan.tasks[ex.component]
                w = plan.assignment[dest]
                apart = [s for s in srcs if plan.assignment[s] != w]
                first = initial_credits(cap, srcs, apart)[ex.task]
                c = SenderCredit(ob.target, dest, w, ex.task, ob.stream, first, out.reports)
                ob.target = c
                out.outbound[(dest, ex.task)] = c
        return out

    def _wire_cycles(self) -> list[CycleTarget | LocalCycleTarget]:
        """Each outbox of a bolt on a cycle into a task on the same cycle (the
        destination reaches the sender back) places past the task's backpressure flag
        (another worker's task: `CycleTarget`) or its full queue (this worker's:
        `LocalCycleTarget`) once the sender's pendingEmitQ holds its whole drain budget:
        why a cycle that multiplies its tuples needs it is in their docstrings. Only
        plain targets: an edge with a policy (credits, latching, throttles, channels)
        keeps its own rules."""
        plan = self.plan
        if not plan.on_cycle:
            return []
        succ = successors(plan.components)
        reach: dict[str, set[str]] = {}
        out: list[CycleTarget | LocalCycleTarget] = []
        for ex in self.executors.values():
            if not ex.on_cycle or ex.is_spout:
                continue
            col = ex.collector
            for ob in col.outboxes:
                target = ob.target
                if target.__class__ is not RemoteTarget and target.__class__ is not ReceiveQueue:
                    continue
                dest = plan.task_component[ob.task]
                if dest not in reach:
                    reach[dest] = reaches(succ, dest)
                if ex.component not in reach[dest]:
                    continue  # not within the cycle: Storm's backpressure
                wrapped: CycleTarget | LocalCycleTarget
                if type(target) is RemoteTarget:
                    wrapped = CycleTarget(target, col.parked, ex.budget)
                else:
                    wrapped = LocalCycleTarget(cast(ReceiveQueue, target), col.parked, ex.budget)
                ob.target = wrapped
                out.append(wrapped)
        return out

    def _wire_latching(self) -> None:
        """Latched edges into tasks of other workers: the sender keeps the last tuple it
        published to each (`Latching`), which the link sends again when that worker
        (re)connects (`latched_for`)."""
        plan = self.plan
        latched = {
            (n, sub.source, sub.stream)
            for n, spec in plan.components.items()
            for sub in spec.subscriptions
            if sub.policy is not None and sub.policy.mode == "latched"
        }
        self.latching: list[Latching] = []
        self.latch_writer: LatchWriter | None = None
        if not latched:
            return
        data = os.environ.get(DATA_ENV)
        restarted = os.environ.get(RESTART_ENV) == "1"
        writer = LatchWriter(f"worker-{self.index}-latch-writer") if data else None
        for ex in self.executors.values():
            for ob in ex.collector.outboxes:
                dest = ob.task
                if dest in self.local_tasks:
                    continue
                if (plan.task_component[dest], ex.component, ob.stream) in latched:
                    w = plan.assignment[dest]
                    path = None
                    if data:  # kept on disk, for this worker's next incarnation
                        path = latch_path(data, plan.name, ex.task, dest, ob.stream)
                        os.makedirs(os.path.dirname(path), exist_ok=True)
                    lt = Latching(ob.target, dest, w, ex.task, ob.stream, path, writer)
                    lt.restore() if restarted else lt.forget()
                    ob.target = lt
                    self.latching.append(lt)
        if writer is not None and self.latching:
            writer.latches = list(self.latching)
            self.latch_writer = writer

    def latched_for(self, worker: int) -> list[tuple]:
        """What latched edges sent last to tasks of `worker` (it just connected), as
        transfer items; the link's thread calls it."""
        items = (lt.again() for lt in self.latching if lt.worker == worker)
        return [i for i in items if i is not None]

    def advance_epoch(self, to: int | None = None, broadcast: bool = False) -> int:
        """The next epoch (or epoch `to`, another worker's, if it is ahead): what epoch
        edges staged becomes visible, their tasks are woken. `broadcast`: tell the
        other workers (a spout's advance_epoch). Returns the epoch now."""
        with self._epoch_lock:
            n = self.epoch + 1 if to is None else to
            if n <= self.epoch:
                return self.epoch
            self.epoch = n
            if self.epoch_edges:
                for q in self.queues.values():
                    if q.chan_list:
                        q.advance_epoch()
        if broadcast and self.link is not None:
            self.link.broadcast_control({"epoch": n})
        return n

    def end_of_input(self) -> int:
        """Every spout has finished and nothing moves, yet trees are in flight: tell each
        bolt that holds tuples until time passes (a windowed bolt) that time has ended,
        with a last tick (END_OF_INPUT) behind whatever its queue holds. Returns the
        tasks told; the completion rule (running.Completion) asks for this."""
        told = 0
        for task, ex in self.executors.items():
            if getattr(ex.obj, "closes_at_end_of_input", False) or self._ticked_anew(ex):
                self.queues[task].publish_force(
                    (TICK_TASK, TICK_STREAM, [(END_OF_INPUT,)], None), 1
                )
                told += 1
            # a barrier edge's remainder short of n leaves as a last short batch, an epoch
            # edge's staged tuples become visible
            if ex.queue.chan_list and ex.queue.flush_held():
                told += 1
        return told

    def _ticked_anew(self, ex: Executor) -> bool:
        """A bolt on tick tuples (topology.tick.tuple.freq.secs: it may hold what it
        flushes on a tick, a batch of N's remainder) gets a last tick at the end of input
        too, as Storm's would get ticks while a kill waits: the first time, then only
        after it consumed tuples since (one feeding another's buffer), so one that emits
        on every tick regardless cannot keep the run from ending."""
        if not isinstance(ex, BoltExecutor) or ex.component == ACKER:
            return False
        if not ex.conf.get("topology.tick.tuple.freq.secs"):
            return False
        seen = self._eoi_consumed.get(ex.task)
        if seen is not None and ex.consumed == seen:
            return False
        self._eoi_consumed[ex.task] = ex.consumed
        return True

    def failure(self) -> str | None:
        """Why this worker failed (its first dead executor), or None."""
        if not self.failed:
            return None
        ex = self.failed[0]
        return ex.fatal if hasattr(ex, "fatal") else str(ex)

    def stats_snapshot(self) -> tuple[list[TaskStats], dict[str, Any]]:
        return self.task_stats(), self.link_stats()

    def unsendable(self, task: int, stream: str, index: int, exc: BaseException) -> None:
        """A tuple task `task` emitted to another worker did not pickle (the link's
        transfer side): the task fails, naming the stream and the field."""
        ex = self.executors.get(task)
        if ex is None or ex.fatal is not None:
            return
        declared = getattr(ex.obj, "declared_streams", None)
        fields = declared().get(stream, ()) if declared is not None else ()
        what = f"field {fields[index]!r}" if 0 <= index < len(fields) else "a value"
        from ..errors import StormishError

        method = "next_tuple" if isinstance(ex, SpoutExecutor) else "execute"
        err = StormishError(
            f"a tuple it emitted on stream {stream!r} cannot be sent to another worker: "
            f"{what} does not pickle ({type(exc).__name__}: {exc}); emitted in its "
            f"{method}, found as its batch left for another worker (the emit had returned, "
            "so its line is not known; a run on one worker sends nothing across)"
        )
        ex.fail_fatally(err)

    def engine_failed(self, where: str, exc: BaseException) -> None:
        """The engine raised on a thread of this worker outside every task's turn (a
        link thread): the worker fails, through its first task still running, so that
        the run (or the supervisor) hears of it rather than waiting on a worker that
        no longer moves tuples."""
        err = engine_failure(where, exc)
        if not self.failed and not self._stop.is_set():  # the first failure only
            for ex in self.executors.values():
                if ex.fatal is None and not ex.done:
                    ex.fail_fatally(err)
                    return
        logging.getLogger("stormish.worker").error("%s", err, exc_info=exc)

    def executor_failed(self, ex: Executor) -> None:
        self.failed.append(ex)
        self._failed_event.set()

    def cycle_congestion(self, task: int, congested: bool) -> None:
        """A cycle executor here holds more than half its drain budget, or no longer
        (asked on each of its parked turns: only a change costs anything). The spouts
        feeding a cycle pause while any cycle executor of any worker is congested: a
        change is announced to the other workers (`WorkerLink.announce_cycle`), where the
        cycle's spouts may run (a cycle across workers: its spout's worker never saw the
        congestion of the cycle executor in the other)."""
        if congested == (task in self._congested):
            return
        with self._cycle_lock:
            if congested:
                self._congested.add(task)
            else:
                self._congested.discard(task)
            self.cycle_congested = bool(self._congested) or self._remote_congested
            link = self.link
            if link is not None:  # under the lock: announced in the order of the changes
                link.announce_cycle(sorted(self._congested))

    def remote_cycle(self, congested: bool) -> None:
        """Whether another worker announced a congested cycle executor (the link's
        thread, on a change)."""
        with self._cycle_lock:
            self._remote_congested = congested
            self.cycle_congested = bool(self._congested) or congested

    # -- ticks -------------------------------------------------------------------------------
    def _tick_freqs(self) -> dict[int, float]:
        freqs = {}
        every = self.plan.conf.get("topology.epoch.millis")
        if every is not None and self.epoch_edges:
            freqs[EPOCH_TIMER] = every / 1000.0
        for t, ex in self.executors.items():
            f = ex.conf.get("topology.tick.tuple.freq.secs")
            if ex.component == ACKER:
                f = rotation_period(self.plan.conf["topology.message.timeout.secs"])
            if f and not ex.is_spout:
                freqs[t] = float(f)
        return freqs

    def _timer_main(self, sched: TickSchedule) -> None:
        """The timer thread: an error that ends it fails the worker (its ticks, which
        windows and time-cut batches wait on, would stop for good)."""
        try:
            self._tick_loop(sched)
        except BaseException as exc:  # noqa: BLE001 - the worker is told, never lost
            if not self._stop.is_set():
                self.engine_failed("the worker's timer thread", exc)

    def _tick_loop(self, sched: TickSchedule) -> None:
        """A tick carries its frequency in seconds (`rate_secs`) as configured, as Storm's
        does (the acker's, its rotation period)."""
        rows = {}
        for task, f in sched.freqs.items():
            ex = self.executors.get(task)
            given = None
            if ex is not None and ex.component != ACKER:
                given = ex.conf.get("topology.tick.tuple.freq.secs")
            rows[task] = (given or f,)
        while not self._stop.is_set():
            nxt = sched.next_due()
            if nxt is None:
                self._stop.wait()
                return
            if not self.clock.wait_until(nxt, self._stop):  # on the clock: a fake one too
                return
            for task in sched.due(self.clock.now()):
                if task == EPOCH_TIMER:  # each worker on its own timer: nothing to tell
                    self.advance_epoch()
                    continue
                self.queues[task].publish_force((TICK_TASK, TICK_STREAM, [rows[task]], None), 1)

    def spout_settled(self) -> None:
        """A spout here finished with no tree in flight, or ended its input (on its own
        thread): once every user spout has, the run is told (nudge.py) and looks for
        the end at once rather than at its next back-off poll."""
        if self.on_spouts_done is None:
            return
        for ex in self.executors.values():
            if not isinstance(ex, SpoutExecutor) or ex.component.startswith("__"):
                continue  # a system spout (the checkpoint spout) never finishes
            if not (ex.input_finished or (ex.finished and ex.is_done())):
                return
        self.on_spouts_done()

    # -- questions ---------------------------------------------------------------------------
    def quiescence(self) -> dict[str, Any]:
        """Counters for completion detection; the caller compares two snapshots."""
        spouts_done = True
        spouts_ended = True  # every user spout called finish (trees may be in flight)
        idle = True
        transferred = consumed = held = 0  # held: what mode channels hold back
        for ex in self.executors.values():
            col = ex.collector
            transferred += col.transferred
            consumed += ex.consumed
            # a system spout (the checkpoint spout) never finishes: the user spouts'
            # trees wait for its commits, so it is done when they are
            if isinstance(ex, SpoutExecutor) and not ex.component.startswith("__"):
                if not ex.is_done():
                    spouts_done = False
                if not (ex.finished or ex.input_finished):
                    spouts_ended = False
            if col.pending or col.buffered() or len(ex.queue):
                idle = False
            elif (busy := getattr(ex.obj, "busy_outside", None)) is not None and busy():
                idle = False  # a multilang child holds tuples it has not answered
            elif isinstance(ex, BoltExecutor) and ex.owes():
                idle = False  # the bolt owes what on_turn will emit (Bolt.holds_work)
            elif isinstance(ex, BoltExecutor) and ex.queue.taken > ex.executed + ex.dropped_stale:
                # a batch taken and not yet run: ticks (END_OF_INPUT's window flush, a
                # buffer flushed on ticks) are counted neither sent nor consumed, so the
                # counts alone missed a last window still running (its output was lost)
                idle = False
            if ex.queue.chan_list:
                held += ex.queue.held()
                # a latched tuple sent again to this worker: counted as sent, once taken
                transferred += sum(getattr(ch, "replayed", 0) for ch in ex.queue.chan_list)
        # what edges' policies let go (stormish.edges) was published and is never consumed
        dropped = sum(st.lost() for st in self.edge_stats)
        if self.link is not None:
            # what the run's own workers sent and this link dropped; tuples for a task no
            # worker has, or from a stranger (transport/link.py), are no part of it
            dropped += self.link.run_drops()
            if self.link.busy():
                idle = False
        return {
            "spouts_done": spouts_done,
            "spouts_ended": spouts_ended,
            "idle": idle,
            "transferred": transferred,
            "consumed": consumed,
            "dropped": dropped,
            "held": held,
        }

    def task_stats(self) -> list[TaskStats]:
        out = []
        edges: dict[int, dict[str, Any]] = {}
        for st in self.edge_stats:
            edges.setdefault(st.task, {})[st.edge] = st.as_dict()
        events = self.health_events
        announced = frozenset() if self.link is None else self.link.tracker.statistics().bp_tasks
        now = self.clock.now()
        real_now = time.monotonic()  # stuck is measured in real time, whatever the clock
        for t, ex in self.executors.items():
            col, q = ex.collector, ex.queue
            emitted = col.emitted()
            kind = (
                "spout" if ex.is_spout else ("acker" if isinstance(ex.obj, AckerBolt) else "bolt")
            )
            complete_ms = 0.0
            if isinstance(ex, SpoutExecutor) and ex.completed:
                complete_ms = ex.complete_seconds / ex.completed * 1000.0
            # what the executor took and has not executed yet counts as held: executed
            # first, as taken only grows ahead of it
            executed = ex.executed
            held = q.taken - executed - getattr(ex, "dropped_stale", 0)
            bp = ex.bp_seconds
            since = ex.bp_since  # read once: the executor's thread clears it
            parked = 0.0 if since is None else max(0.0, now - since)
            bp += parked
            process_ms, process_hist = _process(ex)
            out.append(
                TaskStats(
                    task=t,
                    component=ex.component,
                    worker=self.index,
                    kind=kind,
                    emitted=sum(emitted.values()),
                    transferred=col.transferred,
                    executed=executed,
                    ticks=0 if kind == "spout" else executed - ex.consumed,
                    acked=ex.acked,
                    failed=ex.failed,
                    timed_out=ex.timed_out,
                    execute_latency_ms=(ex.exec_seconds / executed * 1000.0 if executed else 0.0),
                    complete_latency_ms=complete_ms,
                    receive_population=q.size + held,
                    receive_capacity=q.capacity,
                    overflow=q.overflow_size,
                    overflow_high=q.overflow_high,
                    pending_emits=col.pending_count,
                    backpressure_seconds=bp,
                    errors=ex.error_count,
                    last_errors=ex.last_errors(),
                    dropped={} if self.link is None else self.link.task_drops(t),
                    emitted_by_stream=emitted,
                    finished=isinstance(ex, SpoutExecutor) and ex.finished,
                    active=ex.active if isinstance(ex, SpoutExecutor) else None,
                    dead_lettered=ex.dead_lettered + col.dead_letters,
                    edges=edges.get(t, {}),
                    parked_seconds=parked,
                    announced_backpressure=t in announced,
                    execute_histogram=tuple(ex.exec_hist),
                    complete_histogram=tuple(getattr(ex, "complete_hist", ())),
                    process_latency_ms=process_ms,
                    process_histogram=process_hist,
                    stuck_seconds=_stuck_seconds(ex, real_now),
                    health_events=() if events is None else events.for_task(t),
                    gauges=_gauges(ex.obj),
                    worker_started=self.started_at,
                    **_progress(ex.obj),
                )
            )
        return out

    def results(self) -> dict[str, list[tuple[int, Any]]]:
        """What each task's object reports through an optional `result()` method (test
        capture, sink summaries), read after the executors stopped."""
        out: dict[str, list[tuple[int, Any]]] = {}
        for t, ex in self.executors.items():
            fn = getattr(ex.obj, "result", None)
            if callable(fn):
                out.setdefault(ex.component, []).append((t, fn()))
        return out

    def errors(self) -> list[ErrorReport]:
        return [e for ex in self.executors.values() for e in ex.errors]


def _stuck_note(ex: Executor) -> str:
    since = ex.stuck_since
    return "" if since is None else f" (stuck for {time.monotonic() - since:.0f} s: not waited for)"


def _stuck_seconds(ex: Executor, now: float) -> float:
    since = ex.stuck_since  # read once: the watch clears it
    return 0.0 if since is None else max(0.0, now - since)


def _process(ex: Any) -> tuple[float, tuple[int, ...]]:
    """A bolt's process latency (runtime/process_latency.py), read as the execute
    latency is: from another thread, counters that only grow."""
    p = getattr(ex, "process", None)
    if p is None:
        return 0.0, ()
    hist = tuple(p.hist)
    n = sum(hist)
    return (p.seconds / n * 1000.0 if n else 0.0), hist


def _gauges(obj: Any) -> dict[str, float]:
    """An optional `gauges()` -> {name: number} on a component (KafkaSpout's lag per
    partition); read from the statistics thread, so it returns a dict it swaps whole,
    and a failing one is ignored, never fatal."""
    fn = getattr(obj, "gauges", None)
    if not callable(fn):
        return {}
    try:
        return {str(k): float(v) for k, v in fn().items()}
    except Exception:
        return {}


def _progress(obj: Any) -> dict[str, int | None]:
    """An optional `progress()` -> (done, total or None) on a spout (SparkSpout has one);
    read from the statistics thread, so a failing one is ignored, never fatal."""
    fn = getattr(obj, "progress", None)
    if not callable(fn):
        return {}
    try:
        done, total = fn()
        return {"progress_done": int(done), "progress_total": None if total is None else int(total)}
    except Exception:
        return {}


def emit_batch(plan: Plan, name: str, confs: Mapping[str, Mapping[str, Any]]) -> int:
    """The batch component `name` emits in: its own producer batch, and at most half of
    every receive queue it publishes to. In Storm the batch belongs to the receiving
    queue; here a collector has one batch for all its outboxes, so it takes the
    smallest. A batch set explicitly above half a consumer's queue was refused at
    validation (Topology.validate), so this only lowers a batch nobody set."""
    batch = confs[name][_config.BATCH]
    for stream in plan.streams[name]:
        for dest, _sub in plan.consumers(name, stream):
            batch = min(batch, max(1, confs[dest][_config.QUEUE] // 2))
    return batch


def log_emits(obj: Any, who: str) -> None:
    """`topology.debug`: wrap the emit methods the executor bound on `obj` so that each
    emit is logged (INFO, logger 'stormish.debug'; a stderr handler is added when
    logging is not configured, so a worker process's log shows them)."""
    if not debug_log.hasHandlers():
        debug_log.addHandler(logging.StreamHandler())
    if debug_log.getEffectiveLevel() > logging.INFO:
        debug_log.setLevel(logging.INFO)
    for method in ("emit", "emit_many", "emit_direct"):
        fn = getattr(obj, method, None)
        if fn is not None:
            setattr(obj, method, _logged(fn, f"{who} {method}"))


def _logged(fn: Callable[..., Any], what: str) -> Callable[..., Any]:
    def emit(*args: Any, **kwargs: Any) -> Any:
        debug_log.info("%s %s", what, ", ".join([*map(repr, args), *_kw(kwargs)]))
        return fn(*args, **kwargs)

    return emit


def _kw(kwargs: Mapping[str, Any]) -> list[str]:
    return [f"{k}={v!r}" for k, v in kwargs.items()]


def _debug_emits(ex: Executor) -> None:
    """Typed streams checked, emits logged, when the config asks (debug only: the hot
    path pays nothing otherwise); again after the emits are rebound."""
    obj, name = ex.obj, ex.component
    if ex.conf["topology.typecheck"] or ex.conf["topology.debug"]:
        schemas = obj.declared_schemas()
        if schemas:  # typed streams, checked in debug mode only (stormish.schema)
            checked_emits(obj, name, schemas)
    if ex.conf["topology.debug"]:  # wrapped only when on: the hot path pays nothing
        log_emits(obj, f"{name}[{ex.task}]")
