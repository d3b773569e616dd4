"""Tuples dropped past `topology.executor.overflow.limit` are said, not only counted: a
run that lost 86% of its tuples ended "complete", exit 0, with nothing printed (found by
a backpressure hunt). Storm's WorkerState.dropMessage warns of each drop; the worker
warns of the first and of its running total, and the closing summary names the
component and how many it lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_cli import stormish

pytestmark = pytest.mark.timeout(120)

TOPOLOGY = """\
import time
from stormish import Bolt, Spout, Topology

class Fast(Spout):
    outputs = ["seq"]
    def open(self, conf, context):
        self.i = 0
    def next_tuple(self):
        if self.i >= 200_000:
            self.finish()
            return
        for _ in range(100):
            self.emit([self.i])
            self.i += 1

class Slow(Bolt):
    def execute(self, tup):
        end = time.perf_counter() + 20e-6
        while time.perf_counter() < end:
            pass

topology = Topology("drops", config={"topology.acker.executors": 0})
topology.set_spout("fast", Fast())
topology.set_bolt("slow", Slow()).shuffle_grouping("fast")
"""


def test_tuples_dropped_past_the_overflow_limit_are_warned_and_summed_up(tmp_path: Path):
    topo = tmp_path / "drops.py"
    topo.write_text(TOPOLOGY)
    out = stormish("run", str(topo), "-w", "2", "--json", "-c",
                   "topology.executor.overflow.limit=256")  # fmt: skip
    assert out.returncode == 0, out.stderr
    import json

    dropped = json.loads(out.stdout)["components"]["slow"]["dropped"]["overflow_limit"]
    assert dropped > 0  # 200,000 tuples at 20 us against a 256-tuple overflowQ
    assert "dropped" in out.stderr and "topology.executor.overflow.limit" in out.stderr
    out = stormish("run", str(topo), "-w", "2", "-c", "topology.executor.overflow.limit=256")
    assert out.returncode == 0, out.stderr
    assert "note: 'slow' lost " in out.stdout and "tuples from other workers" in out.stdout
