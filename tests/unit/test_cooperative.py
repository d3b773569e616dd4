"""The cooperative scheduler (runtime/scheduler.py) with stand-in executors: turns,
parking on the shared wake-up, begin/end on the scheduler's thread, errors, and the
hand-over of a blocked executor to a thread of its own (never two threads at once)."""

from __future__ import annotations

import threading
import time

import pytest

from stormish.runtime.executor import HELD, IDLE, WORK
from stormish.runtime.queue import ReceiveQueue
from stormish.runtime.scheduler import Scheduler, Watchdog
from stormish.testing import poll_for
from stormish.transport.wakeup import Wakeup

pytestmark = pytest.mark.timeout(30)


class Stand:
    """What the scheduler needs of an executor; records which threads ran it."""

    def __init__(self, name: str, work: int = 0, ready: bool = True):
        self.name = name
        self.component, self.task = name, 1  # what the watchdog's warning names
        self.log_tag = f"{name}:1"  # what log lines and prints of its turns are tagged with
        self.queue = ReceiveQueue(64)
        self.running = True
        self.begun = False
        self.done = False
        self.idle = 0
        self.thread = None
        self.scheduler = None
        self.ready = ready
        self.work = work  # turns with work before it idles
        self.turns = 0
        self.threads: set[int] = set()
        self.inside = 0  # turns running right now (must never exceed 1)
        self.max_inside = 0
        self.began = self.ended = 0
        self.block: threading.Event | None = None
        self.fail_at: int | None = None
        self.fatal: BaseException | None = None
        self.held = False
        self.fail_after_block = False

    def wants_to_begin(self) -> bool:
        return self.ready

    def begin(self) -> None:
        self.began += 1

    def end(self) -> None:
        self.ended += 1

    def fail_fatally(self, exc: BaseException) -> None:
        self.fatal = exc

    def step(self) -> int:
        self.inside += 1
        self.max_inside = max(self.max_inside, self.inside)
        try:
            self.turns += 1
            self.threads.add(threading.get_ident())
            if self.fail_at is not None and self.turns == self.fail_at:
                raise ValueError(f"{self.name} broke")
            if self.block is not None:
                self.block.wait(10)
                self.block = None
                if self.fail_after_block:
                    raise ValueError(f"{self.name} broke after blocking")
            if self.held:
                return HELD
            if self.queue.consume() is not None:
                self.idle = 0
                return WORK
            if self.work > 0:
                self.work -= 1
                self.idle = 0
                return WORK
            return IDLE
        finally:
            self.inside -= 1

    def drive(self) -> None:
        while self.running:
            if self.step() != WORK:
                self.queue.wait(0.001)


def make(executors, park_s=0.5, spin=0, name="sched") -> Scheduler:
    return Scheduler(executors, Wakeup(), park_s, spin, name)


def stop(s: Scheduler, exs) -> None:
    for ex in exs:
        ex.running = False
        ex.queue.wake()
    s.thread.join(5)
    assert not s.thread.is_alive()


def test_turns_go_round_robin_and_begin_and_end_run_once_on_the_scheduler_thread():
    exs = [Stand("a", work=50), Stand("b", work=50), Stand("c", work=50)]
    s = make(exs)
    s.start()
    poll_for(lambda: all(ex.work == 0 for ex in exs), 10, what="every stand-in worked")
    # round-robin: nobody ran far ahead of the others
    assert max(ex.turns for ex in exs) - min(ex.turns for ex in exs) <= 1
    stop(s, exs)
    for ex in exs:
        assert ex.began == 1 and ex.ended == 1 and ex.done
        assert ex.threads == {s.thread.ident}
        assert ex.thread is s.thread and ex.scheduler is s


def test_a_parked_scheduler_wakes_at_once_on_a_publish_to_any_of_its_queues():
    exs = [Stand("a"), Stand("b")]
    s = make(exs, park_s=30.0)  # a long park: only the wake-up can end it in time
    s.start()
    poll_for(lambda: exs[1].queue.parked, 5, what="the scheduler parked")
    before = exs[1].turns
    t0 = time.monotonic()
    exs[1].queue.try_publish((0, "default", [(1,)], None), 1)
    poll_for(lambda: exs[1].turns > before and not exs[1].queue.has_data(), 5, what="woken")
    assert time.monotonic() - t0 < 5
    stop(s, exs)


def test_a_held_executor_does_not_keep_the_scheduler_from_parking():
    exs = [Stand("a"), Stand("b")]
    exs[0].held = True
    s = make(exs, park_s=0.05)
    s.start()
    poll_for(lambda: exs[0].queue.parked, 5, what="parked while one executor is held")
    exs[0].held = False
    stop(s, exs)


def test_input_waiting_for_a_held_executor_does_not_keep_the_scheduler_spinning():
    """Held (backpressure, Bolt.on_turn) with a full queue: the round parks until the
    executor's wake-up (a client thread's callback: context.wake) instead of stepping
    it round after round, which held the GIL from the thread that would end the hold."""
    exs = [Stand("a"), Stand("b")]
    exs[0].held = True
    exs[0].queue.try_publish((0, "default", [(1,)], None), 1)
    s = Scheduler(exs, Wakeup(), 30.0, 0, "sched", held_park_s=30.0)  # only a wake ends it
    s.start()
    poll_for(lambda: exs[0].queue.parked, 5, what="parked with input waiting for a held one")
    turns = exs[0].turns
    assert exs[0].queue.parked and exs[0].turns == turns <= 3, turns  # no spin
    exs[0].held = False
    exs[0].queue.wake()
    poll_for(lambda: not exs[0].queue.has_data(), 5, what="woken, the input taken")
    stop(s, exs)


def test_an_executor_that_may_not_begin_yet_is_not_stepped_until_it_may():
    late = Stand("late", ready=False)
    other = Stand("other", work=5)
    s = make([late, other], park_s=0.01)
    s.start()
    poll_for(lambda: other.work == 0, 5, what="the other worked")
    assert late.began == 0 and late.turns == 0
    late.ready = True
    late.queue.wake()
    poll_for(lambda: late.turns > 0, 5, what="it began and ran")
    assert late.began == 1
    stop(s, [late, other])


def test_a_stopped_executor_that_never_began_is_done_without_end():
    late = Stand("late", ready=False)
    s = make([late], park_s=0.01)
    s.start()
    stop(s, [late])
    assert late.done and late.began == 0 and late.ended == 0


def test_an_error_in_a_turn_ends_that_executor_only():
    bad, good = Stand("bad"), Stand("good", work=1000)
    bad.fail_at = 3
    s = make([bad, good], park_s=0.01)
    s.start()
    poll_for(lambda: bad.done, 5, what="the broken executor ended")
    assert isinstance(bad.fatal, ValueError) and bad.ended == 1
    poll_for(lambda: good.work == 0, 5, what="the other went on")
    stop(s, [bad, good])
    assert good.fatal is None


def test_a_blocked_turn_keeps_its_thread_and_a_new_scheduler_takes_the_others():
    slow, a, b = Stand("slow"), Stand("a"), Stand("b")
    slow.block = threading.Event()
    schedulers: list[Scheduler] = []

    def make_next(executors):
        return Scheduler(executors, Wakeup(), 0.01, 0, f"sched-{len(schedulers)}")

    first = make_next([slow, a, b])
    schedulers.append(first)
    first.start()
    dog = Watchdog(schedulers, 0.05, make_next)
    dog.start()
    try:
        poll_for(lambda: len(schedulers) == 2, 5, what="a second scheduler")
        second = schedulers[1]
        assert second.executors == [a, b]
        before = a.turns
        a.queue.try_publish((0, "default", [(1,)], None), 1)
        poll_for(lambda: a.turns > before, 5, what="the others run while one is blocked")
        assert slow.block is not None  # still blocked in its turn
        assert a.thread is second.thread and slow.thread is first.thread
        assert slow.scheduler is None and a.scheduler is second
        slow.block.set()
        poll_for(lambda: slow.block is None and slow.turns > 1, 5, what="it runs on alone")
        # the blocked executor now runs on its own thread: the first scheduler's
        stop_all = [slow, a, b]
        for ex in stop_all:
            ex.running = False
            ex.queue.wake()
        first.thread.join(5)
        second.thread.join(5)
        assert not first.thread.is_alive() and not second.thread.is_alive()
    finally:
        dog.stop.set()
        dog.thread.join(2)
    assert slow.threads == {first.thread.ident}
    assert second.thread.ident in a.threads <= {first.thread.ident, second.thread.ident}
    for ex in (slow, a, b):
        assert ex.max_inside == 1, f"{ex.name} ran on two threads at once"
        assert ex.began == 1 and ex.ended == 1


def test_the_watchdog_leaves_a_scheduler_of_one_executor_alone():
    slow = Stand("slow")
    slow.block = threading.Event()
    schedulers = [make([slow], park_s=0.01)]
    schedulers[0].start()
    dog = Watchdog(schedulers, 0.02, lambda exs: make(exs))
    dog.start()
    try:
        poll_for(lambda: slow.turns == 1, 5, what="blocked in its first turn")
        seen = dog.rounds
        poll_for(lambda: dog.rounds >= seen + 5, 5, what="five more looks of the watchdog")
        assert len(schedulers) == 1 and slow.scheduler is schedulers[0]
    finally:
        slow.block.set()
        dog.stop.set()
        dog.thread.join(2)
    stop(schedulers[0], [slow])


def test_an_executor_that_dies_in_the_turn_it_was_moved_in_is_not_run_again():
    slow, a = Stand("slow"), Stand("a")
    slow.block = threading.Event()
    slow.fail_after_block = True  # raises once its (blocked) first turn goes on
    schedulers: list[Scheduler] = []

    def make_next(executors):
        return Scheduler(executors, Wakeup(), 0.01, 0, f"sched-{len(schedulers)}")

    first = make_next([slow, a])
    schedulers.append(first)
    first.start()
    dog = Watchdog(schedulers, 0.05, make_next)
    dog.start()
    try:
        poll_for(lambda: len(schedulers) == 2, 5, what="a second scheduler")
        slow.block.set()
        first.thread.join(5)
        assert not first.thread.is_alive()  # it ended: nothing left to run on it
        assert slow.done and isinstance(slow.fatal, ValueError)
        assert slow.turns == 1 and slow.ended == 1
        stop(schedulers[1], [a])
    finally:
        dog.stop.set()
        dog.thread.join(2)
