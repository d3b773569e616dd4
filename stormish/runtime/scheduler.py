"""One thread runs a worker's executors in turns: the execution model for the GIL.

Storm gives every executor a thread, which on the JVM buys parallelism. Under the GIL it
buys none: three to five busy executor threads take turns on one lock, every hand-off
costs a wake-up, and which thread gets the GIL next decides the rate (the same word count
took 2.2 to 4.0 s from one run to the next). Here one scheduler thread runs the loop
turns (`Executor.step`) of a worker's executors round-robin. Each turn is bounded (a bolt
consumes at most its queue's budget, a spout calls `next_tuple` at most a burst), so no
executor starves another; Storm's loops keep their meaning inside the turn: the
pendingEmitQ is flushed first, a parked executor reads no input (except on a cycle), a
spout drains its own queue first and honours max.spout.pending.

When a whole round found nothing to do, the thread parks on one wake-up shared by all
its executors' queues (with a link, in the link's poll, which watches that wake-up too),
up to the shortest idle wait among their strategies, or the shortest backpressure wait
in a round where one of them was parked, so new input ends the wait at once and timers
(rotation, flushes, backpressure retries) still run.

Executors whose user code blocks get a thread of their own, so a bolt stuck in I/O never
stops its siblings: declared (`topology.executor.own.thread`, per component), or
detected: a watchdog thread sees a turn that has run longer than
`topology.scheduler.blocking.millis`; that executor keeps the thread it is blocked on
(which, once the turn returns, runs only that executor's loop) and a new scheduler thread
takes over the others. Nothing is moved under a running turn. The same watchdog lends
a served ZeroMQ link to its own threads while a turn runs long (`LEND_AFTER`), so other
workers' statuses and batches are read during a slow bolt's turn; the next round takes
the link back.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Collection
from types import FrameType
from typing import TYPE_CHECKING, Any

from .. import logs
from ..transport.wakeup import Wakeup
from .error_report import engine_failure, is_engine
from .executor import HELD, IDLE, WORK, Executor

if TYPE_CHECKING:
    from ..transport.link import WorkerLink

WATCH_EVERY = 0.02  # the watchdog's period, seconds
# A turn this long lends the link to its own threads until it ends (Scheduler.lend_link):
# while a slow bolt's turn runs, statuses and batches from other workers are still read.
# The watchdog looks this often while a scheduler serves a link: what other workers can
# send meanwhile is bounded by the link's buffers, but the later it is read the more of
# it lands in an overflowQ before the upstream hears (the halt-lag)
LEND_AFTER = 0.005
log = logging.getLogger("stormish.scheduler")


class Scheduler:
    """Runs `executors` in turns on one thread."""

    def __init__(
        self,
        executors: list[Executor],
        wakeup: Wakeup,
        park_s: float,
        spin_rounds: int,
        name: str,
        held_park_s: float | None = None,
    ):
        self.executors = executors
        self.wakeup = wakeup
        # how long a round with nothing to do parks: the shortest idle wait among the
        # executors, or the shortest backpressure wait when one of them is parked (its
        # retry is due then); a publish into any queue ends the park at once either way
        self.park_s = park_s
        self.held_park_s = park_s if held_park_s is None else held_park_s
        self.spin_rounds = spin_rounds
        # the worker's ZeroMQ link, served by this thread between turns (WorkerLink.serve):
        # `service()` once a round, `park(timeout)` instead of the wakeup's wait; set
        # before `start` by whoever hands it over (the worker, the watchdog)
        self.link: WorkerLink | None = None
        self.name = name
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        # what the watchdog reads: the executor in a turn (None between turns), since when
        self.current: Executor | None = None
        self.since = 0.0
        # what the stuck watch reads (runtime/stuck_watch.py): the executor in
        # prepare/open, since when (not a turn: nothing is moved from under a begin)
        self.beginning: tuple[Executor, float] | None = None
        # the executor in prepare/open or cleanup/close, named by this thread's log lines
        # and prints as `current` is in a turn
        self.naming: Executor | None = None
        self.evicted: Executor | None = None
        self.handed_link: WorkerLink | None = None
        for ex in executors:
            ex.queue.share_wakeup(wakeup)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        for ex in self.executors:
            ex.thread = self.thread
            ex.scheduler = self
        self.thread.start()

    def evict(self, ex: Executor, started: float) -> list[Executor] | None:
        """From the watchdog: `ex` has been in one turn since `started`. It keeps this
        thread; the others are returned for a new scheduler, which serves the link too
        (`handed_link`) (None: the turn ended meanwhile, nothing moves)."""
        with self.lock:
            if self.current is not ex or self.since != started or self.evicted is not None:
                return None
            self.evicted = ex
            ex.scheduler = None
            rest = [e for e in self.executors if e is not ex]
            self.executors = [ex]
            # the link is served between turns, never in one: the blocked thread is in a
            # turn, so it is not touching a socket, and once the turn returns it runs
            # only its executor
            self.handed_link, self.link = self.link, None
            return rest

    def lend_link(self, ex: Executor, started: float) -> bool:
        """From the watchdog: `ex` has been in one turn since `started`; the link this
        thread serves goes to its own threads until the next round takes it back (the
        thread is in a turn, so it is not touching a socket). False: nothing to lend,
        or the turn ended meanwhile."""
        with self.lock:
            link = self.link
            if self.current is not ex or self.since != started or link is None:
                return False
            if not link.served:
                return False
            link.unserve()
            return True

    def _main(self) -> None:
        # log records and prints on this thread name the executor whose turn it is
        logs.register(lambda: None if (ex := self.current or self.naming) is None else ex.log_tag)
        try:
            self._turns()
        except BaseException as exc:  # noqa: BLE001 - the engine's own error, between turns
            self._died(exc)
        finally:
            logs.unregister()
            if self.link is not None:  # its executors ended: the link's threads send the rest
                self.link.unserve()

    def _turns(self) -> None:
        live = list(self.executors)
        # not begun yet (a spout submitted inactive waits to open); a scheduler taking
        # over from a blocked one gets executors that began there
        waiting = [ex for ex in live if not ex.begun]
        begun = [ex for ex in live if ex.begun]
        rounds_idle = 0
        monotonic = time.monotonic
        lock = self.lock
        link = self.link
        while True:
            if link is not None:
                if not link.served:  # lent to its threads for a long turn: back
                    link.serve(self.wakeup)  # type: ignore[arg-type]  # an FdWakeup
                if link.service():
                    rounds_idle = 0
            if waiting:
                for ex in list(waiting):
                    if not ex.running:
                        waiting.remove(ex)
                        live.remove(ex)
                        ex.done = True
                    elif ex.wants_to_begin():
                        waiting.remove(ex)
                        self.beginning = (ex, monotonic())
                        self.naming = ex
                        began = self._guard(ex, ex.begin)
                        self.beginning = self.naming = None
                        if began:
                            ex.begun = True
                            begun.append(ex)
                        else:  # prepare/open failed: the task is dead, as with a thread
                            live.remove(ex)
                            ex.done = True
            if not live:
                return
            did = False
            held: list[Executor] = []  # parked this round (backpressure, Bolt.on_turn)
            for ex in begun:
                if not ex.running:
                    did = True  # the list changes: look again at once
                    self._finish(ex)
                    begun.remove(ex)
                    live.remove(ex)
                    break
                with lock:
                    self.current = ex
                    self.since = monotonic()
                try:
                    r = ex.step()
                except BaseException as exc:  # noqa: BLE001 - the executor dies, not us
                    ex.fail_fatally(exc)
                    self._end_quietly(ex)  # done: it is never stepped again, here or alone
                    begun.remove(ex)
                    live.remove(ex)
                    r = -1
                with lock:
                    self.current = None
                    evicted = self.evicted
                # what the turn emitted for other workers leaves now, and what came is
                # read, not a round later (not lent during the turn, nor handed over)
                if link is not None and evicted is None and link.served:
                    link.between_turns()
                if evicted is not None:
                    if not evicted.done:  # it died in the turn it was moved in: nothing to run
                        self._become(evicted)
                    return
                if r < 0:
                    did = True  # the list changed: look again at once
                    break
                if r == WORK:
                    did = True
                elif r == IDLE:
                    ex.idle += 1
                elif r == HELD:
                    ex.idle += 1
                    held.append(ex)
            if did:
                rounds_idle = 0
                continue
            rounds_idle += 1
            if rounds_idle > self.spin_rounds:
                self._park(begun, waiting, self.held_park_s if held else self.park_s, held)

    def _park(
        self,
        begun: list[Executor],
        waiting: list[Executor],
        park_s: float,
        held: Collection[Executor] = (),
    ) -> None:
        queues = [ex.queue for ex in begun]
        for q in queues:
            q.parked = True
        try:
            # input waiting for an executor held this round is no reason not to park: it
            # takes none next round either, and a round-after-round spin would hold the
            # GIL from the threads that end the hold (a NATS loop thread with PubAcks)
            if not any(ex.queue.has_data() for ex in begun if ex not in held):
                timeout = 0.1 if waiting and not begun else park_s
                if self.link is not None:
                    self.link.park(timeout)
                else:
                    self.wakeup.wait(timeout)
        finally:
            for q in queues:
                q.parked = False
            self.wakeup.clear()

    def _died(self, exc: BaseException) -> None:
        """The engine failed on this thread outside every task's turn (serving the link,
        waiting): the tasks it ran have no thread left, so they end, the first failing
        with the error (the worker, and through it the run or its supervisor, is told,
        with the traceback) and the rest quietly. Before, the thread died alone and its
        tasks stayed `running`: the run never completed and never failed."""
        with self.lock:  # no turn is running: the watchdog neither moves nor lends now
            self.current = None
            executors = list(self.executors)
        err = engine_failure(f"the worker's scheduler thread {self.name!r}", exc)
        live = [ex for ex in executors if not ex.done]
        told = fail_first(live, err)
        for ex in live:
            if getattr(ex, "begun", False):
                self._end_quietly(ex)
            else:
                ex.done = True
        if not told:  # every task had ended: no one to fail, but never lost
            log.error("%s", err, exc_info=exc)

    def _become(self, ex: Executor) -> None:
        """This thread is `ex`'s own now: its turn blocked; the others moved on."""
        logs.set_running(ex.log_tag)
        ex.queue.own_wakeup()
        if self._guard(ex, ex.drive):
            self._finish(ex)
        else:
            self._end_quietly(ex)

    def _guard(self, ex: Executor, fn: Callable[[], Any]) -> bool:
        try:
            fn()
            return True
        except BaseException as exc:  # noqa: BLE001
            ex.fail_fatally(exc)
            return False

    def _finish(self, ex: Executor) -> None:
        self.naming = ex  # cleanup/close's prints and records name it
        try:
            self._guard(ex, ex.end)
        finally:
            self.naming = None
        ex.done = True

    def _end_quietly(self, ex: Executor) -> None:
        self.naming = ex
        try:
            ex.end()
        except BaseException:  # noqa: BLE001 - already failed; its first error is kept
            pass
        finally:
            self.naming = None
        ex.done = True


def fail_first(executors: list[Executor], err: BaseException) -> bool:
    """Executors left without a thread by an engine error: none runs again, and the
    first fails with `err` (its worker, and through it the run, is told); whether there
    was one to fail."""
    for ex in executors:
        ex.running = False
    if not executors:
        return False
    executors[0].fail_fatally(err)
    return True


def user_call(thread_id: int | None) -> FrameType | None:
    """The frame of the call into user code that the thread is in (the first frame
    outside the engine that an engine frame called), None between calls."""
    frame = sys._current_frames().get(thread_id) if thread_id is not None else None
    chain = []
    while frame is not None:
        chain.append(frame)
        frame = frame.f_back
    for i in range(len(chain) - 1, 0, -1):  # outermost first
        if is_engine(chain[i].f_code.co_filename) and not is_engine(
            chain[i - 1].f_code.co_filename
        ):
            return chain[i - 1]
    return None


class Watchdog:
    """Moves an executor whose turn blocks to a thread of its own (see the module doc)."""

    def __init__(self, schedulers: list[Scheduler], limit_s: float, make: Callable[..., Scheduler]):
        self.schedulers = schedulers
        self.limit_s = limit_s
        self.make = make
        self.stop = threading.Event()
        self.rounds = 0  # looks taken (tests wait for some to prove a negative)
        self.failures = 0  # looks that raised (logged the first time, then seldom)
        # per scheduler in a turn: the turn's start, the call into user code seen running
        # at the last look (its frame: held, so no later call can take its identity), and
        # when it began at the latest (the look before the one that first saw it)
        self.calls: dict[Scheduler, tuple[float, Any, float, float]] = {}
        self.thread = threading.Thread(target=self._run, name="scheduler-watchdog", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _call_time(self, s: Scheduler, since: float, now: float) -> tuple[float, str]:
        """How long the call into user code that `s`'s thread is in now has run, as
        far as the looks saw it: from the first look that found it (0: it is between
        calls, or this look is the first to find it), and its name. A turn is judged by
        its calls, not its length: a bolt at 0.2 ms a tuple runs a batch of 500 in a
        100 ms turn and blocks no one for long. A call first seen counts from then, not
        from the last look: on a loaded machine a look can come 100 ms late, and a quick
        call found by it was moved as blocking."""
        thread = s.thread
        frame = user_call(thread.ident) if thread is not None else None
        rec = self.calls.get(s)
        if frame is None:
            self.calls[s] = (since, None, now, now)
            return 0.0, ""
        if rec is not None and rec[0] == since and rec[1] is frame:
            began = rec[2]
        else:
            began = now  # a call no look has seen yet: it has run at least since now
        self.calls[s] = (since, frame, began, now)
        code = frame.f_code
        name = getattr(code, "co_qualname", code.co_name)
        return now - began, f"{name} at {os.path.basename(code.co_filename)}:{frame.f_lineno}"

    def _run(self) -> None:
        every = WATCH_EVERY
        while not self.stop.wait(every):
            self.rounds += 1
            try:
                every = self._look()
            except Exception:  # noqa: BLE001 - a watchdog that dies moves and lends nothing
                self.failures += 1
                if self.failures == 1 or self.failures % 1000 == 0:  # not every 20 ms
                    log.exception(
                        "the scheduler watchdog's look failed (%d times); it looks again",
                        self.failures,
                    )
                every = WATCH_EVERY

    def _no_thread(self, s: Scheduler, rest: list[Executor], exc: Exception) -> None:
        """The executors moved off a blocked turn got no thread (one could not be
        started): they cannot run, so the first fails with the error (the worker is
        told) and the rest end; the link they would have served goes back to its own
        threads. Left as they were, the worker moved no tuple and no run ended."""
        err = engine_failure("the scheduler watchdog (a thread for the other executors)", exc)
        fail_first(rest, err)
        for ex in rest:
            ex.done = True
        link, s.handed_link = s.handed_link, None
        if link is not None:
            link.unserve()

    def _look(self) -> float:
        """One look at every scheduler; returns when to look next."""
        now = time.monotonic()
        every = WATCH_EVERY  # idle schedulers: no hurry
        for s in list(self.schedulers):
            ex, since = s.current, s.since
            if ex is None:
                self.calls.pop(s, None)
                continue
            if s.link is not None:  # in a turn: look again soon, to lend the link
                every = LEND_AFTER
                if now - since >= LEND_AFTER:
                    s.lend_link(ex, since)
            if self.limit_s <= 0 or len(s.executors) < 2 or now - since < WATCH_EVERY:
                continue  # a short turn (most are: 2 ms) is not looked into
            ran, call = self._call_time(s, since, now)
            if ran < self.limit_s:
                continue
            rest = s.evict(ex, since)
            if rest:
                self.calls.pop(s, None)
                log.warning(
                    "component %r task %d: one call into its code (%s) has run %.0f ms "
                    "(blocking user code?); it goes on on a thread of its own, the other "
                    "executors on a new scheduler thread "
                    "(topology.scheduler.blocking.millis, topology.executor.own.thread); "
                    "past topology.executor.stuck.secs it is reported as stuck",
                    ex.component,
                    ex.task,
                    call,
                    ran * 1000,
                )
                try:
                    new = self.make(rest)
                    new.link = s.handed_link
                    new.start()
                except Exception as exc:  # noqa: BLE001 - no thread for them: they fail
                    self._no_thread(s, rest, exc)
                    continue
                self.schedulers.append(new)  # listed once it runs
        return every
