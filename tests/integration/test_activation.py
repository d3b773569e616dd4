"""Activation: every spout callback, activate and deactivate
included, runs on the spout's executor thread; a topology submitted inactive opens no
spout and emits nothing until it is activated. On one worker (in-process) and on two
worker processes."""

from __future__ import annotations

import threading
import time

import pytest

from stormish import LocalCluster, Spout, Topology
from stormish.testing import CaptureBolt, ListSpout, poll_for


class Recording(Spout):
    """Emits `n` reliable tuples, then finishes once all are acked; records which thread
    ran each callback."""

    outputs = ["i"]

    def __init__(self, n: int = 50, until_reactivated: bool = False):
        self.n = n
        # finish only after a deactivate and an activate: a run that ends as soon as its
        # spout is done (the nudge) ended before the test's activate otherwise
        self.until_reactivated = until_reactivated

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
        elif self.acked == self.n and (not self.until_reactivated or self._reactivated()):
            self.finish()

    def _reactivated(self) -> bool:
        names = [c for c, _ in self.calls]
        return "deactivate" in names and "activate" in names[names.index("deactivate") :]

    def ack(self, msg_id):
        self._note("ack")
        self.acked += 1

    def result(self):
        return getattr(self, "calls", None)  # None: never opened


def topology(name: str, n: int = 50, until_reactivated: bool = False) -> Topology:
    t = Topology(name, config={"topology.max.spout.pending": 4})
    t.set_spout("spout", Recording(n, until_reactivated))
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
        cluster.submit(topology("act", until_reactivated=True))
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


class Endless(Spout):
    """Emits forever, a little at a time."""

    outputs = ["v"]

    def next_tuple(self):
        self.emit((1,))
        time.sleep(0.001)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_kill_on_another_thread_ends_a_wait_for_completion_with_the_kill(workers):
    """The waiter gets the run's final statistics (KILLED). With worker processes it got
    "ZMQError: Socket operation on non-socket": the kill closed the control socket a
    look of the waiter's was asking through."""
    got: list[object] = []
    with LocalCluster(workers=workers) as c:
        for i in range(5):  # the kill lands at a different point of the looks each time
            t = Topology(f"kill-while-waiting-{workers}-{i}")
            t.set_spout("s", Endless())
            t.set_bolt("b", CaptureBolt()).shuffle_grouping("s")
            c.submit(t)

            def wait(name=t.name):
                try:
                    got.append(c.wait_complete(name, timeout=60).status)
                except BaseException as exc:  # noqa: BLE001 - what the waiter saw is the point
                    got.append(exc)

            waiter = threading.Thread(target=wait)
            waiter.start()
            poll_for(lambda name=t.name: c.statistics(name).component("b").executed > 0, 30)
            c.kill(t.name)
            waiter.join(60)
            assert not waiter.is_alive()
    assert [str(g) for g in got] == ["killed"] * 5


def test_a_kill_racing_the_natural_end_returns_the_final_statistics():
    """The kill deactivates the workers while the run, complete, stops them on another
    thread: it asked a stopping worker and raised "worker 0 ... died during active".
    The kill is held at its first step until that stop has begun (when the run's own
    end gets there first; otherwise for 2 s, and the run is killed instead)."""
    t = Topology("kill-at-the-end")
    t.set_spout("s", ListSpout([[i] for i in range(20)]))
    t.set_bolt("b", CaptureBolt(), parallelism=2).shuffle_grouping("s")
    with LocalCluster(workers=2, config={"topology.acker.executors": 0}) as c:
        c.submit(t)
        running = c._get(t.name)
        stopping = threading.Event()
        stop_all, set_active = running.group.stop_all, running.set_active

        def stop_all_noted(*args):
            stopping.set()
            return stop_all(*args)

        def set_active_late(active):
            stopping.wait(2)
            return set_active(active)

        running.group.stop_all = stop_all_noted
        running.set_active = set_active_late
        got: list[object] = []
        waiter = threading.Thread(target=lambda: got.append(running.wait_complete(60).status))
        waiter.start()
        final = c.kill(t.name)  # raised WorkerError
        waiter.join(60)
    assert str(final.status) in ("complete", "killed")
    assert [str(s) for s in got] == [str(final.status)]
