"""KafkaSpout's surface: argument errors name the argument, importing stormish.kafka
needs no client library, and a component's gauges reach the statistics and /metrics."""

from __future__ import annotations

import subprocess
import sys

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from stormish.kafka import KafkaSpout, Retry
from stormish.metrics import TopologySample, registry
from stormish.runtime.stats import TaskStats, TopologyStatistics, aggregate


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"topics": None}, "exactly one of topics= and topic_pattern="),
        ({"topic_pattern": "x.*"}, "exactly one of topics= and topic_pattern="),
        ({"group_id": ""}, "group_id"),
        ({"processing_guarantee": "exactly_once"}, "processing_guarantee must be one of"),
        ({"first_poll_offset": "newest"}, "first_poll_offset must be one of"),
        ({"max_uncommitted_offsets": 0}, "max_uncommitted_offsets"),
        ({"commit_interval_secs": -1}, "commit_interval_secs"),
        ({"retry": 3}, "retry must be a stormish.kafka.Retry"),
        ({"fields": ["v"]}, "give translator"),
    ],
)
def test_bad_arguments_are_named(kw, message):
    args = {"bootstrap_servers": "127.0.0.1:9092", "topics": ["t"], "group_id": "g", **kw}
    with pytest.raises((ValueError, TypeError), match=message):
        KafkaSpout(**args)


def test_default_fields_and_stream_per_topic():
    s = KafkaSpout("h:1", topics="t", group_id="g")
    assert s.declared_streams() == {
        "default": ("topic", "partition", "offset", "key", "value", "timestamp")
    }
    s = KafkaSpout("h:1", topics=["a", "b"], group_id="g", stream_per_topic=True)
    assert set(s.declared_streams()) == {"a", "b"}


def test_importing_stormish_kafka_needs_no_client_and_opening_says_which_extra():
    code = (
        "import sys; sys.modules['confluent_kafka'] = None\n"
        "import stormish.kafka\n"
        "from stormish.kafka.client import open_client\n"
        "try:\n"
        "    open_client('127.0.0.1:1', 'g', {})\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'stormish[kafka]'" in out.stdout


def test_gauges_are_summed_per_component_and_scraped_with_their_name():
    t1 = TaskStats(1, "k", 0, "spout", gauges={"lag:t/0": 5.0})
    t2 = TaskStats(2, "k", 0, "spout", gauges={"lag:t/1": 7.0})
    comps = aggregate([t1, t2])
    assert comps["k"].gauges == {"lag:t/0": 5.0, "lag:t/1": 7.0}
    stats = TopologyStatistics("top", "running", 1.0, 1, {1: t1, 2: t2}, comps)
    text = generate_latest(registry(lambda: [TopologySample(stats, {})])).decode()
    got = {
        s.labels["gauge"]: s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "stormish_component_gauge"
    }
    assert got == {"lag:t/0": 5.0, "lag:t/1": 7.0}


def test_retry_rejects_negative_delays():
    with pytest.raises(ValueError, match="delay_period_secs"):
        Retry(delay_period_secs=-1)


def test_the_rest_component_view_carries_the_gauges():
    from stormish.ui.rest import component_view

    t = TaskStats(1, "k", 0, "spout", gauges={"lag:t/0": 3.0})
    stats = TopologyStatistics("top", "running", 1.0, 1, {1: t}, aggregate([t]))
    view = component_view(stats, "k")
    assert view["gauges"] == {"lag:t/0": 3.0}
    assert view["executorStats"][0]["gauges"] == {"lag:t/0": 3.0}
