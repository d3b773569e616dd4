"""Storm's ShellBolt and ShellSpout, scenario by scenario, against real children.

Each test names the Storm source (storm-client: task/ShellBolt.java, spout/ShellSpout.java,
utils/ShellProcess.java, multilang/JsonSerializer.java, utils/ShellBoltMessageQueue.java
and its test) whose behaviour it checks: what a multilang component written for Storm
(pystorm, storm.js) sees there, it sees here.
"""

from __future__ import annotations

import math
import shutil
import sys

import pytest
from integration.parts import Count

from stormish import Bolt, LocalCluster, Topology
from stormish.multilang import ShellBolt, ShellSpout
from stormish.testing import ListSpout, poll_for

from .procs import CHILDREN

pytestmark = pytest.mark.timeout(120)
PY = sys.executable


def errors(stats, component):
    return [e for t in stats.tasks.values() if t.component == component for e in t.last_errors]


# -- ShellSpout ------------------------------------------------------------------------------
def test_a_spout_child_with_nothing_to_emit_is_paced_by_the_spout_wait_strategy(tmp_path):
    """ShellSpout.nextTuple blocks until the child's sync; a nextTuple that emitted
    nothing is then followed by the spout wait strategy's wait (SpoutExecutor, Storm's
    defaults: sleep 1 ms, as here), so an idle child gets at most ~1,000 `next` a second.
    Here every sync woke the spout's loop, ending that wait at once: an idle pystorm
    spout was sent `next` as fast as it answered (4,000-8,000 a second) and its worker
    spun a core (97% CPU measured). 200 calls took 0.02-0.04 s; paced, 0.25-0.4 s."""
    out = tmp_path / "took"
    t = Topology("mlidle")
    cmd = [PY, str(CHILDREN / "idle_spout.py"), str(out), "200"]
    t.set_spout("s", ShellSpout(cmd, ["v"]))
    t.set_bolt("sink", Count()).shuffle_grouping("s")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: out.exists() and out.read_text(), timeout=60, interval=0.02,
                 what="200 next_tuple calls")  # fmt: skip
        stats = cluster.statistics(t.name)
        cluster.kill(t.name)
    took = float(out.read_text())
    assert took >= 0.15, f"200 empty next_tuple calls in {took:.3f}s: not paced"
    assert errors(stats, "s") == []


# -- ShellBolt: what goes to the child -----------------------------------------------------------
NODE = shutil.which("node")


class Record(Bolt):
    """Keeps each input's values by its first (an index), and acks."""

    def prepare(self, conf, context):
        self.got = {}

    def execute(self, tup):
        self.got[tup.values[0]] = tup.values[1]
        self.ack(tup)

    def result(self):
        return self.got


def echo(child, values, serializer="json"):
    """[i, v] rows -> ShellBolt(`child`, echoing its input) -> Record: ({i: v}, spout, errors)."""
    cmd = {"node": [NODE, str(CHILDREN / "echo.js")],
           "pystorm": [PY, str(CHILDREN / "echo.py"), serializer]}[child]  # fmt: skip
    name = f"mlecho-{child}-{serializer}"
    t = Topology(name, config={"topology.max.replays": 1})
    t.set_spout("rows", ListSpout(list(enumerate(values)), fields=["i", "v"]))
    t.set_bolt("echo", ShellBolt(cmd, ["i", "v"], serializer=serializer)).shuffle_grouping("rows")
    t.set_bolt("record", Record()).shuffle_grouping("echo")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete(name, timeout=90)
        results = cluster._get(name).results()
    (got,) = results["record"]
    (spout,) = results["rows"]
    return got, spout, errors(stats, "echo")


NODE_ONLY = pytest.mark.skipif(NODE is None, reason="no node on this machine")
CHILDREN_JSON = [pytest.param("node", marks=NODE_ONLY), "pystorm"]


@pytest.mark.parametrize("child", CHILDREN_JSON)
def test_nan_and_the_infinities_reach_a_json_child_as_null(child):
    """Storm writes its JSON with json-simple (JsonSerializer.writeBoltMsg,
    JSONValue.toJSONString), which writes a NaN or infinite Double as null. Python's
    json wrote the tokens NaN and Infinity, which are not JSON: storm.js's JSON.parse
    and pystorm's (simplejson) threw and the child died, on every retry of the tuple
    and of every tuple it held with it (all four dead-lettered here)."""
    got, spout, errs = echo(child, [math.nan, math.inf, -math.inf, 1.5])
    assert got == {0: None, 1: None, 2: None, 3: 1.5}
    assert sorted(spout["acked"]) == [0, 1, 2, 3] and not spout["failed"]
    assert errs == []
