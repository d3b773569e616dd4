"""Activation: every spout callback, activate and deactivate
included, runs on the spout's executor thread; a topology submitted inactive opens no
spout and emits nothing until it is activated. On one worker (in-process) and on two
worker processes."""

from __future__ import annotations

import threading
import time

import pytest

from stormish import LocalCluster, Spout, Topology
from stormish.testing import CaptureBolt, poll_for


class Recording(Spout):
    """Emits `n` reliable tuples, then finishes once all are acked; records which thread
    ran each callback."""

    outputs = ["i"]

    def __init__(self, n: int = 50):
        self.n = n

    def open(self, conf, context):
        self.calls = [("open", threading.get_ident())]
        self.sent = 0
        self.acked = 0

    def _note(self, name: str) -> None:
        if not self.calls or self.calls[-1][0] != name:  # runs of one callback as one
            self.calls.append((name, threading.get_ident()))

    def activate(self):
        self._note("activate")

    def deactivate(self):
        self._note("deactivate")

    def next_tuple(self):
        self._note("next_tuple")
        if self.sent < self.n:
            self.emit([self.sent], msg_id=self.sent)
            self.sent += 1
        elif self.acked == self.n:
            self.finish()

    def ack(self, msg_id):
        self._note("ack")
        self.acked += 1

    def result(self):
        return getattr(self, "calls", None)  # None: never opened


def topology(name: str, n: int = 50) -> Topology:
    t = Topology(name, config={"topology.max.spout.pending": 4})
    t.set_spout("spout", Recording(n))
    t.set_bolt("sink", CaptureBolt()).shuffle_grouping("spout")
    return t


def emitted(cluster: LocalCluster, name: str) -> int:
    return cluster.statistics(name).components["spout"].emitted


def spout_active(cluster: LocalCluster, name: str) -> bool | None:
    (task,) = [t for t in cluster.statistics(name).tasks.values() if t.component == "spout"]
    return task.active


@pytest.mark.parametrize("workers", [1, 2])
def test_activate_and_deactivate_run_on_the_spout_thread(workers):
    with LocalCluster(workers=workers) as cluster:
        cluster.submit(topology("act"))
        poll_for(lambda: emitted(cluster, "act") > 0, 30, what="first emits")
        cluster.deactivate("act")
        poll_for(lambda: spout_active(cluster, "act") is False, 30, what="deactivated")
        cluster.activate("act")
        stats = cluster.wait_complete("act", timeout=60)
        (calls,) = cluster._get("act").results()["spout"]
    assert stats.components["sink"].executed == 50
    names = [c for c, _ in calls]
    assert names[:3] == ["open", "activate", "next_tuple"]
    assert "deactivate" in names and names.index("deactivate") < len(names) - 1
    threads = {tid for _, tid in calls}
    assert len(threads) == 1, f"spout callbacks ran on {len(threads)} threads: {calls}"


@pytest.mark.parametrize("workers", [1, 2])
def test_a_topology_submitted_inactive_opens_nothing_until_activated(workers):
    with LocalCluster(workers=workers) as cluster:
        cluster.submit(topology("idle", n=20), active=False)
        # submit returns once every worker runs: watch a bounded window for emits
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            stats = cluster.statistics("idle")
            assert stats.components["spout"].emitted == 0
            assert spout_active(cluster, "idle") is False
            time.sleep(0.05)
        cluster.activate("idle")
        stats = cluster.wait_complete("idle", timeout=60)
        (calls,) = cluster._get("idle").results()["spout"]
    assert stats.components["sink"].executed == 20
    assert [c for c, _ in calls][:2] == ["open", "activate"]


def test_killing_a_topology_that_was_never_activated_stops_cleanly():
    with LocalCluster() as cluster:
        cluster.submit(topology("never"), active=False)
        stats = cluster.kill("never")
        assert stats.status == "killed"
        assert stats.components["spout"].emitted == 0
        assert cluster._get("never").results() == {"spout": [None], "sink": [[]]}
