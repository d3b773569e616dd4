"""Storm's ShellBolt and ShellSpout, scenario by scenario, against real children.

Each test names the Storm source (storm-client: task/ShellBolt.java, spout/ShellSpout.java,
utils/ShellProcess.java, multilang/JsonSerializer.java, utils/ShellBoltMessageQueue.java
and its test) whose behaviour it checks: what a multilang component written for Storm
(pystorm, storm.js) sees there, it sees here.
"""

from __future__ import annotations

import sys

import pytest
from integration.parts import Count

from stormish import LocalCluster, Topology
from stormish.multilang import ShellSpout
from stormish.testing import poll_for

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
