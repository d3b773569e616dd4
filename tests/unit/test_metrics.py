"""Metric families from hand-made statistics: names, labels, cumulative buckets."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from stormish.metrics import TopologySample, _buckets, registry
from stormish.runtime.stats import EXECUTE_BUCKETS, TaskStats, TopologyStatistics, aggregate


def test_buckets_are_cumulative_and_end_with_inf():
    assert _buckets((1, 0, 2), (0.1, 1.0)) == [("0.1", 1), ("1.0", 1), ("+Inf", 3)]


def test_a_scrape_of_hand_made_statistics_has_the_counts_and_no_tuple_labels():
    hist = [0] * (len(EXECUTE_BUCKETS) + 1)
    hist[3] = 7
    t = TaskStats(
        task=4, component="split", worker=1, kind="bolt", executed=7, emitted=9,
        emitted_by_stream={"default": 9}, dropped={"peer_lost": 2}, execute_latency_ms=0.2,
        receive_population=64, receive_capacity=64, execute_histogram=tuple(hist),
    )  # fmt: skip
    stats = TopologyStatistics("wc", "running", 1.5, 2, {4: t}, aggregate([t]))
    text = generate_latest(registry(lambda: [TopologySample(stats, {0: 1, 1: 0})])).decode()
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    task = (("component", "split"), ("task", "4"), ("topology", "wc"), ("worker", "1"))
    assert got[("stormish_executed_total", task)] == 7
    assert got[("stormish_emitted_total", tuple(sorted((*task, ("stream", "default")))))] == 9
    assert got[("stormish_dropped_total", tuple(sorted((*task, ("reason", "peer_lost")))))] == 2
    assert got[("stormish_backpressure_status", task)] == 1  # a full queue
    assert got[("stormish_execute_latency_seconds_count", task)] == 7
    le = tuple(sorted((*task, ("le", repr(EXECUTE_BUCKETS[3])))))
    assert got[("stormish_execute_latency_seconds_bucket", le)] == 7
    assert abs(got[("stormish_execute_latency_seconds_sum", task)] - 0.0014) < 1e-9
    assert got[("stormish_worker_restarts_total", (("topology", "wc"), ("worker", "0")))] == 1
    labels = {k for (_, ls) in got for k, _ in ls}
    assert labels <= {"topology", "component", "task", "worker", "stream", "reason", "le"}


def test_the_executed_help_says_what_a_spouts_executed_counts():
    """Found: the help said a spout's executed counts what next_tuple emitted; it counts
    the control messages the spout handled (runtime/spout_executor.py `_control`): the
    acker's completion lists, fails, timeout resets and ticks. docs/metrics.md agrees."""
    from pathlib import Path

    from stormish.metrics import _COUNTERS

    (help_text,) = [h for name, _, h in _COUNTERS if name == "executed"]
    assert "next_tuple" not in help_text and "emitted" not in help_text
    for what in ("control messages", "completion lists", "fails", "resets", "ticks"):
        assert what in help_text, (what, help_text)
    docs = Path(__file__).parents[2] / "docs" / "metrics.md"
    (row,) = [r for r in docs.read_text().splitlines() if "`stormish_executed_total`" in r]
    for what in ("control messages", "completion lists", "fails", "resets", "ticks"):
        assert what in row, (what, row)
