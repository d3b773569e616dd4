"""Issue 27 §2: the typed seams keep what the bare shapes did (statuses compare and
serialise as their text, nimbus reads an older client's tuples, Declarer is public)."""

from __future__ import annotations

import json

import pytest

from stormish import Declarer, LaneSpec, Topology
from stormish.cluster import api
from stormish.errors import StormishError
from stormish.runtime.status import ENDED, TopologyStatus
from stormish.testing import CaptureBolt, ListSpout, LoseStatuses
from stormish.topology import _Declarer
from stormish.transport import wire


def test_a_status_is_its_text_in_json_comparisons_and_formatting():
    s = TopologyStatus.RUNNING
    assert s == "running" and f"{s}" == "running" and str(s).upper() == "RUNNING"
    assert json.dumps({"status": s}) == '{"status": "running"}'
    assert wire.loads(wire.dumps({"status": s})) == {"status": "running"}
    assert TopologyStatus("starting").live and not TopologyStatus.KILLED.live
    assert {str(e) for e in ENDED} == {"complete", "killed", "failed"}
    assert all(e.ended for e in ENDED) and not TopologyStatus.REBALANCING.ended


def test_nimbus_messages_cross_the_wire_as_records_and_old_tuples_still_read():
    for msg in (api.Kill("wc", 2.5), api.Rebalance("wc", 3), api.LogsRequest("wc", 1, {"1@s": 9})):
        assert wire.loads(wire.dumps(msg)) == msg
    ask = api.LogAsk(7, "wc", 0, None, 4096)
    assert wire.loads(wire.dumps({"logs": [ask]})) == {"logs": [ask]}
    assert api.message("kill", ("wc", 0)) == api.Kill("wc", 0)
    assert api.message("kill", ("wc",)) == api.Kill("wc", None)  # the message timeout
    assert api.message("rebalance", ["wc", 2]) == api.Rebalance("wc", 2)
    assert api.message("logs", ("wc", None, {}, 100)) == api.LogsRequest("wc", None, {}, 100)
    t = Topology("t")
    assert api.message("submit", (t, {})) == api.Submit(t, {}, True)
    assert api.message("submit", (t, {}, False)).active is False
    assert api.message("stats", "wc") == "wc"  # a one-value verb is the value
    with pytest.raises(StormishError, match="kill"):
        api.message("kill", ("wc", 0, 1, 2))
    with pytest.raises(StormishError, match="expects a Rebalance"):
        api.message("rebalance", 3)


def test_declarer_is_public_and_lanes_have_their_own_field():
    t = Topology("d")
    d = t.set_spout("s", ListSpout([[1]], ["k"]))
    assert isinstance(d, Declarer) and _Declarer is Declarer
    t.set_bolt("b", CaptureBolt(), 2).ordered_lanes("s", ["k"], lanes=8, max_in_flight=5)
    t.set_bolt("c", CaptureBolt()).custom_grouping("s", lambda values, n: 0)
    (lanes,) = t.components["b"].subscriptions
    assert lanes.lanes == LaneSpec(8, 5) and lanes.custom is None
    (custom,) = t.components["c"].subscriptions
    assert callable(custom.custom) and custom.lanes is None


def test_lose_statuses_withholds_the_first_n_or_all():
    three = LoseStatuses(3)
    assert [three(object()) for _ in range(5)] == [True, True, True, False, False]
    every = LoseStatuses(-1)
    assert all(every(object()) for _ in range(10))
