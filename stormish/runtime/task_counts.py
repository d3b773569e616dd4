"""A task's counters: what its executor executed, consumed, acked and failed, and how long
its executes took. One plain object per task, written by the loop's thread only (the
executor's hot paths bind it to a local), read by the worker's statistics."""

from __future__ import annotations

from .stats import EXECUTE_BUCKETS


class TaskCounts:
    __slots__ = (
        "executed",
        "consumed",
        "acked",
        "failed",
        "timed_out",
        "dead_lettered",
        "dropped_stale",
        "exec_seconds",
        "exec_hist",
    )

    def __init__(self) -> None:
        self.executed = 0  # tuples run through the component (ticks included)
        self.consumed = 0  # tuples taken off the receive queue and done with (ticks not)
        self.acked = 0
        self.failed = 0
        self.timed_out = 0
        self.dead_lettered = 0  # spouts: past topology.max.replays; bolts: DEAD_LETTER results
        self.dropped_stale = 0  # taken from the queue, never executed: past lifespan_ms
        self.exec_seconds = 0.0
        self.exec_hist = [0] * (len(EXECUTE_BUCKETS) + 1)  # see stats.EXECUTE_BUCKETS
