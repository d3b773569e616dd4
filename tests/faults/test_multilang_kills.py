"""Multilang children killed from outside (kill -9), again and again, during a run of
two worker processes: every sentence is acked in the end (the in-flight ones replayed),
no word is lost, each kill is one reported fault, and no child outlives the run."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import Counter

import pytest
from integration.parts import Count
from integration.test_multilang import HERE, children, merged_counts

from stormish import LocalCluster, Topology
from stormish.multilang import ShellBolt
from stormish.testing import ListSpout

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

N = 20_000
KILLS = 8


def test_killed_children_are_restarted_and_nothing_is_lost():
    sentences = [f"s{i} the cow jumped over the moon" for i in range(N)]
    t = Topology("mlkills", config={"topology.workers": 2, "topology.max.spout.pending": 500})
    t.set_spout("sentences", ListSpout([(s,) for s in sentences], fields=["sentence"]))
    for ser in ("json", "msgpack"):
        split = ShellBolt([sys.executable, str(HERE / "splitter.py"), ser], ["word"],
                          serializer=ser)  # fmt: skip
        t.set_bolt(f"split_{ser}", split, parallelism=2).shuffle_grouping("sentences")
    t.set_bolt("count", Count(), parallelism=2).fields_grouping("split_json", ["word"])
    kills = []
    stop = threading.Event()

    def killer():
        while len(kills) < KILLS and not stop.wait(0.4):
            running = [pid for pid, cmd in children() if "splitter.py" in cmd]
            if running:
                pid = running[len(kills) % len(running)]
                os.kill(pid, signal.SIGKILL)
                kills.append(pid)

    with LocalCluster() as cluster:
        cluster.submit(t)
        th = threading.Thread(target=killer)
        th.start()
        try:
            stats = cluster.wait_complete("mlkills", timeout=240)
        finally:
            stop.set()
            th.join()
        results = cluster._get("mlkills").results()
    assert len(kills) >= 3, "the run ended before the children could be killed"
    (spout,) = results["sentences"]
    assert sorted(spout["acked"]) == list(range(N))
    want = Counter(w for s in sentences for w in s.split())
    got = merged_counts(results)
    assert all(got[w] >= n for w, n in want.items())  # at least once
    faults = sum(c.errors for name, c in stats.components.items() if name.startswith("split"))
    assert faults == len(kills)
    assert children() == []
