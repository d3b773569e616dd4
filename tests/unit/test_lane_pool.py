"""Concurrent lanes: whatever order a pool's threads finish items in,
each lane's items run one at a time in submission order and are replayed in that order;
calls made on a pool thread are recorded, not run, and replayed on the task's thread."""

from __future__ import annotations

import threading
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.runtime.lane_pool import LanePool


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 4),
    st.lists(st.tuples(st.integers(0, 5), st.floats(0, 0.002)), min_size=1, max_size=40),
)
def test_each_lane_runs_and_replays_in_order_whatever_order_threads_finish(threads, items):
    wake = threading.Event()
    pool = LanePool(threads, wake.set, "t")
    running: dict[int, int] = {}
    lock = threading.Lock()
    overlap_in_lane = []
    replayed: list[tuple[int, int]] = []
    seq = {lane: 0 for lane, _ in items}
    for lane, pause in items:
        n = seq[lane]
        seq[lane] += 1

        def work(lane=lane, n=n, pause=pause):
            with lock:
                running[lane] = running.get(lane, 0) + 1
                overlap_in_lane.append(running[lane] > 1)
            time.sleep(pause)  # simulated blocking work of this item
            with lock:
                running[lane] -= 1
            return (lane, n)

        pool.submit(lane, work, replayed.append)
    deadline = time.monotonic() + 30
    while pool.pending:
        if not pool.completed():
            assert time.monotonic() < deadline
            wake.wait(0.05)
            wake.clear()
    pool.stop(5)
    assert not any(overlap_in_lane)  # never two items of one lane at once
    for lane in seq:
        assert [n for ln, n in replayed if ln == lane] == list(range(seq[lane]))


def test_calls_on_a_pool_thread_are_recorded_and_on_the_task_thread_run():
    calls = []

    class Obj:
        def emit(self, values, stream="default"):
            calls.append((threading.current_thread().name, values))

    obj = Obj()
    wake = threading.Event()
    pool = LanePool(2, wake.set, "t")
    pool.bind(obj)
    obj.emit((1,))  # the task's own thread: runs at once
    assert calls == [(threading.current_thread().name, (1,))]
    got = []

    def work():
        pool.capture.current = "tuple-7"
        obj.emit((2,))
        return list(pool.capture.ops)

    pool.submit("lane", work, got.append)
    while not pool.completed():
        wake.wait(5)
    ((real, args, kwargs, current),) = got[0]
    assert len(calls) == 1 and args == ((2,),) and current == "tuple-7"
    real(*args, **kwargs)  # replayed on this thread
    assert calls[-1] == (threading.current_thread().name, (2,))
    pool.stop(5)
