"""The REST layer's windows over samples of cumulative statistics (a fake clock)."""

from __future__ import annotations

from stormish.runtime.stats import TaskStats, TopologyStatistics, aggregate
from stormish.ui.rest import KEEP, History, window


def stats(executed: int, uptime: float, latency_ms: float = 2.0) -> TopologyStatistics:
    t = TaskStats(task=1, component="b", worker=0, kind="bolt", executed=executed,
                  execute_latency_ms=latency_ms)  # fmt: skip
    return TopologyStatistics("t", "running", uptime, 1, {1: t}, aggregate([t]))


def test_a_window_counts_from_the_oldest_sample_within_it_and_capacity_is_storms():
    h = History()
    for now, n in [(0.0, 0), (100.0, 1000), (400.0, 4000), (700.0, 7000)]:
        h.add(now, stats(n, now + 1))
    before = h.since(700.0, 600.0)
    assert before is not None and before[0] == 100.0  # 0.0 is older than the window
    w = window(stats(7000, 701), before, 700.0)
    assert w["seconds"] == 600.0 and w["components"]["b"]["executed"] == 6000
    # capacity: 6000 executed x 2 ms / 600 s = 0.02 of the time busy
    assert abs(w["components"]["b"]["capacity"] - 0.02) < 1e-12
    assert h.since(700.0, 0.5) is None  # nothing but now's own sample


def test_without_a_sample_the_window_is_the_whole_life_and_old_samples_are_dropped():
    w = window(stats(50, 10.0), None, 10.0)
    assert w["seconds"] == 10.0 and w["components"]["b"]["executed"] == 50
    h = History()
    h.add(0.0, stats(0, 1))
    h.add(KEEP + 100.0, stats(1, KEEP + 101))
    assert len(h.samples) == 1
