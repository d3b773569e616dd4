"""`stormish submit` ships the modules a topology file imports from its own directory,
as Storm ships the topology jar: a topology file with a
helper module and a helper package next to it runs on a real cluster whose nimbus and
supervisors cannot import them (their PYTHONPATH lacks that directory); with
`--no-ship` nimbus answers with the missing module's name."""

from __future__ import annotations

import re
import subprocess
import sys

import psutil
import pytest

from .test_cluster import Cluster

TOPOLOGY = """
from stormish import BasicBolt, Topology
from stormish.testing import ListSpout

import helper31
from helpkg31.words import shout


class Shout(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        self.emit([shout(tup.values[0])])


topology = Topology("shipped31", config={"topology.workers": 2})
topology.set_spout("s", ListSpout([[w] for w in helper31.WORDS], fields=["word"]))
topology.set_bolt("shout", Shout(), parallelism=2).shuffle_grouping("s")
topology.set_bolt("count", helper31.Count(), parallelism=2).shuffle_grouping("shout")
"""

HELPER = """
from stormish import BasicBolt

WORDS = ["storm", "stream", "tuple"] * 100


class Count(BasicBolt):
    def execute(self, tup):
        assert tup.values[0].endswith("!"), tup.values
"""


@pytest.fixture
def project(tmp_path):
    d = tmp_path / "project"
    (d / "helpkg31").mkdir(parents=True)
    (d / "topo31.py").write_text(TOPOLOGY)
    (d / "helper31.py").write_text(HELPER)
    (d / "helpkg31" / "__init__.py").write_text("")
    (d / "helpkg31" / "words.py").write_text("def shout(w):\n    return w.upper() + '!'\n")
    return d


def submit(cluster: Cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stormish.cli", "submit", *args,
         "--nimbus", f"127.0.0.1:{cluster.api}"],
        env=cluster.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_submit_ships_the_topology_files_own_modules(tmp_path, project):
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    (tmp_path / "cluster").mkdir()
    c = Cluster(str(tmp_path / "cluster"))
    try:
        assert str(project) not in c.env.get("PYTHONPATH", "")
        topo = str(project / "topo31.py")
        # not shipped: nimbus cannot unpickle it, and says which module it lacks
        out = submit(c, topo, "--no-ship")
        assert out.returncode == 2, out.stderr
        assert re.search(r"No module named 'help(er|kg)31'", out.stderr), out.stderr
        assert "submitted --no-ship, so helper31, helpkg31 from" in out.stderr, out.stderr
        assert "shipping" not in out.stderr
        assert all(r["name"] != "shipped31" for r in c.call("list"))
        # shipped: it runs to completion on the supervisors' workers
        out = submit(c, topo, "--wait", "--timeout", "90")
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"shipping with the topology the modules it imports from {project}: " in (out.stderr)
        assert "helper31, helpkg31 (" in out.stderr, out.stderr
        stats = c.call("stats", "shipped31")
        assert stats.status == "complete"
        assert stats.components["count"].executed == 300
        assert stats.components["count"].failed == 0
        assert stats.components["s"].acked == 300
    finally:
        c.close()
        print(c.log("nimbus.log")[-3000:])
        left = [p for p in me.children(recursive=True) if p.pid not in before]
        for p in left:
            p.kill()
        assert not left, f"processes left running: {[p.pid for p in left]}"
