"""`stormish monitor`'s view (stormish/monitor.py), a pure function of the statistics and
the nimbus row it is given: rates between ticks, each piece of news told once."""

from __future__ import annotations

from stormish.monitor import MonitorView
from stormish.runtime.stats import TaskStats, TopologyStatistics, aggregate


def stats(executed: int, errors: int = 0, status: str = "running") -> TopologyStatistics:
    tasks = [
        TaskStats(1, "words", 0, "spout", emitted=executed),
        TaskStats(
            2, "count", 0, "bolt", executed=executed, receive_population=50,
            receive_capacity=200, errors=errors,
            last_errors=("ValueError: bad at count.py:9 in execute",) if errors else (),
        ),
    ]  # fmt: skip
    return TopologyStatistics("wc", status, 1.0, 1, {t.task: t for t in tasks}, aggregate(tasks))


def test_rates_are_per_second_between_ticks_and_the_line_names_each_component():
    view = MonitorView()
    first = view.tick(stats(100), None, now=10.0)
    assert first.components["count"]["executed_per_second"] == 0  # nothing to compare yet
    second = view.tick(stats(400), None, now=12.0)
    assert second.components["count"]["executed_per_second"] == 150.0
    assert second.components["count"]["queue_fill"] == 0.25
    line = second.text()[0]
    assert line.startswith("wc [running] ") and "count 150/s q25%" in line
    assert second.json(5.0)["components"]["count"]["executed_per_second"] == 150.0
    # a spout's rate is what it emits (it executes nothing: it showed 0/s)
    assert "words 150/s" in line
    assert second.components["words"]["emitted_per_second"] == 150.0


def test_a_workers_restart_is_news_once():
    view = MonitorView()
    w = {"index": 0, "supervisor": "s0", "port": 7000, "state": "running", "pid": 42}
    row = {"worker_status": [dict(w, restarts=0)]}
    assert view.tick(stats(1), row, 1.0).news == []
    row = {"worker_status": [dict(w, restarts=1, pid=43, last_exit="killed by signal SIGKILL")]}
    news = view.tick(stats(2), row, 2.0).news
    said = "worker 0 on s0:7000: running (pid 43), 1 restart; last killed by signal SIGKILL"
    assert news == [said]
    assert view.tick(stats(3), row, 3.0).news == []


def test_the_status_is_the_one_list_shows():
    """A deactivated topology showed [running] in monitor and inactive in list (found by
    a walk-through); a kill's or a rebalance's wait shows as list shows it too."""
    view = MonitorView()
    for row, shown in (
        ({"status": "running", "active": False}, "inactive"),
        ({"status": "running", "active": True, "killing": True}, "killing"),
        ({"status": "running", "active": False, "rebalancing": True}, "rebalancing"),
        ({"status": "running", "active": True}, "running"),
    ):
        assert view.tick(stats(1), row, 1.0).text()[0].startswith(f"wc [{shown}] ")
