"""`TopologyStatistics.from_dict` reads back what `to_dict` wrote (nimbus's saved final
statistics of an ended topology, served by `stats` after it restarts)."""

from __future__ import annotations

import json

import pytest

from stormish import BasicBolt, LocalCluster, Topology
from stormish.runtime.stats import TopologyStatistics
from stormish.testing import ListSpout

pytestmark = pytest.mark.timeout(60)


class Echo(BasicBolt):
    outputs = ["v"]

    def execute(self, tup):
        self.emit(tup.values)


def test_the_statistics_of_a_run_read_back_equal():
    t = Topology("back")
    t.set_spout("s", ListSpout([[i] for i in range(10)]))
    t.set_bolt("b", Echo(), parallelism=2).shuffle_grouping("s")
    with LocalCluster() as c:
        c.submit(t)
        stats = c.wait_complete("back", timeout=30)
    assert any(t.execute_histogram for t in stats.tasks.values())  # tuples come back too
    back = TopologyStatistics.from_dict(json.loads(stats.to_json()))
    assert back == stats


def test_what_is_not_statistics_is_refused():
    with pytest.raises(ValueError, match="not stormish.statistics/1"):
        TopologyStatistics.from_dict({"name": "x"})
    stats = {"schema": "stormish.statistics/1", "name": "x", "status": "killed"}
    with pytest.raises(KeyError):
        TopologyStatistics.from_dict(stats)  # no tasks
