"""Lanes of one task run concurrently, each in order: for ordered_lanes into a bolt whose
user code blocks (I/O), with `topology.lanes.concurrency` > 1.

A lane's work items (a batch of its tuples, or a formed batch of a batch-settle bolt)
run one at a time, in order, on a small pool of threads; different lanes run side by
side. The bolt's collector is not thread-safe and its emits must keep their order, so a
pool thread does not emit: what the user code calls (emit, ack, fail, ...) while a pool
thread runs it is recorded with the tuple it was executing, and the task's own thread
replays it when the item completes, in each lane's order (`LanePool.completed`). So
anchoring, acking, batching and backpressure happen exactly as on one thread, and a lane
never has two items in flight.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

CAPTURED = (
    "emit",
    "emit_many",
    "emit_direct",
    "ack",
    "fail",
    "ack_batch",
    "fail_batch",
    "reset_timeout",
    "report_error",
)


class Capture(threading.local):
    """Per pool thread: the calls recorded for the item it runs, and its current tuple."""

    ops: list | None = None
    current: Any = None


class LanePool:
    def __init__(self, threads: int, wake: Callable[[], None], name: str):
        self.threads = threads
        self.wake = wake
        self.name = name
        self.capture = Capture()
        self._lanes: dict[Any, deque[tuple[Callable[[], Any], Callable[[Any], None]]]] = {}
        self._ready: deque[Any] = deque()  # lanes with work and no item running
        self._busy: set[Any] = set()
        self._done: deque[tuple[Callable[[Any], None], Any]] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self._started: list[threading.Thread] = []
        self.pending = 0  # items submitted and not yet replayed (the executor's thread)

    def bind(self, obj: Any) -> None:
        """Route the component's collector methods through the capture."""
        cap = self.capture
        for name in CAPTURED:
            real = getattr(obj, name, None)
            if real is None:
                continue
            setattr(obj, name, _dispatch(name, real, cap))

    def submit(self, lane: Any, work: Callable[[], Any], done: Callable[[Any], None]) -> None:
        """From the task's thread: run `work()` on a pool thread after the lane's earlier
        items; `done(result)` runs on the task's thread (`completed`)."""
        self.pending += 1
        with self._cond:
            q = self._lanes.get(lane)
            if q is None:
                q = self._lanes[lane] = deque()
            q.append((work, done))
            if lane not in self._busy and len(q) == 1:
                self._ready.append(lane)
            if len(self._started) < self.threads:
                t = threading.Thread(target=self._run, name=f"{self.name}-lane", daemon=True)
                self._started.append(t)
                t.start()
            self._cond.notify()

    def completed(self) -> int:
        """Replay finished items, in the order they finished (each lane's in its order);
        returns how many. The task's thread only."""
        n = 0
        done = self._done
        while done:
            cb, result = done.popleft()
            cb(result)
            n += 1
        self.pending -= n
        return n

    def _run(self) -> None:
        cap = self.capture
        cond = self._cond
        while True:
            with cond:
                while not self._ready and not self._stop:
                    cond.wait()
                if self._stop and not self._ready:
                    return
                lane = self._ready.popleft()
                work, done = self._lanes[lane].popleft()
                self._busy.add(lane)
            cap.ops, cap.current = [], None
            try:
                result = work()
            except BaseException as exc:  # noqa: BLE001 - handed to the task's thread
                result = exc
            cap.ops = None
            with cond:
                self._done.append((done, result))
                self._busy.discard(lane)
                if self._lanes[lane]:
                    self._ready.append(lane)
                    cond.notify()
                else:
                    del self._lanes[lane]
            self.wake()

    def stop(self, timeout: float) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for t in self._started:
            t.join(timeout)


def _dispatch(name: str, real: Callable[..., Any], cap: Capture) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        ops = cap.ops
        if ops is None:  # the task's own thread: as ever
            return real(*args, **kwargs)
        ops.append((real, args, kwargs, cap.current))
        return None

    call.__name__ = name
    return call
