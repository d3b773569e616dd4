"""kill -9 of a worker on either side of an edge between two workers (LocalCluster, real
worker processes on 127.0.0.1):

- a latched edge whose *sending* worker restarts: the sender is a bolt that published
  its tuple once and never again; its restarted worker restores the tuple from its data
  directory and gives it to a task that starts later (the receiving worker, restarted
  after it);
- a `fail` edge whose *receiving* worker restarts after its sender spent all its credit:
  the new connection re-syncs the credit (the sender starts from its share again), so
  the edge takes tuples again, and a fan-out stays all or nothing.
"""

from __future__ import annotations

import glob
import os
import signal
import time

import pytest

from stormish import BasicBolt, LocalCluster, Spout, Topology
from stormish.testing import poll_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]


class Once(Spout):
    """Emits `v1` once per run (a marker file: a restarted spout does not emit it again),
    then finishes once the file `go` exists."""

    outputs = ["v"]

    def __init__(self, marker: str, go: str):
        self.marker, self.go = marker, go

    def next_tuple(self):
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            self.emit(("v1",))
        elif os.path.exists(self.go):
            self.finish()


class Derive(BasicBolt):
    """Computes a setting from its input, once: it publishes only when it gets input."""

    outputs = ["setting"]

    def prepare(self, conf, context):
        self.made: list[str] = []

    def execute(self, tup):
        self.made.append(f"cfg-{tup.values[0]}")
        self.emit((self.made[-1],))

    def result(self):
        return self.made


class Apply(BasicBolt):
    def prepare(self, conf, context):
        self.seen: list[str] = []

    def execute(self, tup):
        self.seen.append(tup.values[0])

    def result(self):
        return self.seen


def kill_and_restart(running, index: int) -> None:
    handle = running.group.handles[index]
    os.kill(handle.proc.pid, signal.SIGKILL)
    handle.proc.wait(10)
    running.restart_worker(index)


def test_a_restarted_sending_worker_gives_its_latched_tuple_to_a_task_that_starts_later(
    tmp_path, watch
):
    """a_src (worker 0) -> b_derive (worker 1) -latched-> c_apply (worker 0). b_derive's
    worker is killed and restarted (its task gets no input again: it never publishes
    again), then c_apply's worker is: the new c_apply gets `cfg-v1` from b_derive's
    restored latch, once."""
    go = tmp_path / "go"
    t = Topology("latch-keep", config={"topology.workers": 2, "topology.acker.executors": 0})
    t.set_spout("a_src", Once(str(tmp_path / "emitted"), str(go)))
    t.set_bolt("b_derive", Derive()).shuffle_grouping("a_src")
    t.set_bolt("c_apply", Apply()).all_grouping("b_derive", mode="latched")
    with LocalCluster() as cluster:
        cluster.submit(t)
        running = cluster._get(t.name)
        watch.begin()

        def where() -> dict[str, int]:
            stats = cluster.statistics(t.name)
            return {s.component: s.worker for s in stats.tasks.values()}

        def executed(name: str) -> int:
            return cluster.statistics(t.name).components[name].executed

        at = where()
        assert at["a_src"] == at["c_apply"] != at["b_derive"]
        poll_for(lambda: executed("c_apply") == 1, 30, 0.02, "the setting applied")
        where_kept = os.path.join(running.group.datadir, "latched", "*", "*.latch")
        poll_for(lambda: len(glob.glob(where_kept)) == 1, 10, 0.01, "the latch on disk")
        kill_and_restart(running, at["b_derive"])
        kill_and_restart(running, at["c_apply"])
        poll_for(lambda: executed("c_apply") == 1, 30, 0.02, "the new task got the setting")
        go.touch()
        stats = cluster.wait_complete(t.name, timeout=30)
        results = running.results()
        watch.freeze()
    assert results["b_derive"] == [[]]  # restarted, it never published again
    assert results["c_apply"] == [["cfg-v1"]]  # from the restored latch, once
    edge = stats.components["c_apply"].edges["b_derive:default"]
    assert edge["arrived"] == edge["executed"] == 1


class Phases(Spout):
    """Phase 1: a tuple a call (a ms apart) until the file `enough` exists; phase 2: once
    the file `more` exists, 20 more; then it finishes. Unreliable: a rejection fails no
    tree."""

    outputs = ["n"]

    def __init__(self, enough: str, more: str):
        self.enough, self.more = enough, more

    def open(self, conf, context):
        self.n = 0
        self.second = 0

    def next_tuple(self):
        if not os.path.exists(self.enough):
            self.emit((self.n,))
            self.n += 1
            time.sleep(0.001)  # the source's pace
        elif self.second < 20 and os.path.exists(self.more):
            self.emit((self.n,))
            self.n += 1
            self.second += 1
        elif self.second == 20:
            self.finish()


class Held(BasicBolt):
    """Records what it executes; waits (up to 60 s) in its first execute until the file
    `release` exists, so its edge fills and its sender spends all its credit."""

    def __init__(self, release: str):
        self.release = release

    def prepare(self, conf, context):
        self.seen: list[int] = []

    def execute(self, tup):
        deadline = time.monotonic() + 60
        while not os.path.exists(self.release) and time.monotonic() < deadline:
            time.sleep(0.01)  # a bolt stuck in I/O, not the test's synchronisation
        self.seen.append(tup.values[0])

    def result(self):
        return self.seen


def test_a_restarted_receiving_worker_resyncs_the_credit_of_a_fail_edge(tmp_path, watch):
    """a_src and c_all (worker 0), b_full (worker 1, a `fail` edge of capacity 25). b_full
    holds its first tuple: its edge fills, and a_src, emitting on, spends all the credit
    it was granted and has its tuples rejected with their fan-out. b_full's worker is
    killed and restarted: on the new connection a_src starts from its share again, and
    the next 20 tuples reach both edges. Without the re-sync a_src would hold no credit
    for ever and reject them all."""
    enough, more, release = tmp_path / "enough", tmp_path / "more", tmp_path / "release"
    t = Topology("credit-resync", config={"topology.workers": 2, "topology.acker.executors": 0})
    t.set_spout("a_src", Phases(str(enough), str(more)))
    t.set_bolt("b_full", Held(str(release))).shuffle_grouping("a_src", overflow="fail", capacity=25)
    t.set_bolt("c_all", Apply()).shuffle_grouping("a_src")
    with LocalCluster() as cluster:
        cluster.submit(t)
        running = cluster._get(t.name)
        watch.begin()

        def edge() -> dict:
            return cluster.statistics(t.name).components["b_full"].edges["a_src:default"]

        at = {s.component: s.worker for s in cluster.statistics(t.name).tasks.values()}
        assert at["a_src"] == at["c_all"] != at["b_full"]
        poll_for(lambda: edge()["queued"] == 25, 30, 0.02, "the fail edge full")
        seen = edge()["rejected"]
        poll_for(lambda: edge()["rejected"] > seen + 20, 30, 0.02, "rejections while full")
        enough.touch()

        def syncs() -> int:  # connections on which a_src's worker re-synced credits
            links = cluster.statistics(t.name).links
            return links[f"worker-{at['a_src']}"]["credit_syncs"]

        before = syncs()
        kill_and_restart(running, at["b_full"])
        poll_for(lambda: syncs() > before, 30, 0.02, "the credit re-synced")
        release.touch()
        more.touch()
        poll_for(lambda: edge()["executed"] == 20, 30, 0.02, "phase 2 through the fail edge")
        final = cluster.wait_complete(t.name, timeout=30)
        results = running.results()
        watch.freeze()
    ((*_, last),) = results["c_all"]
    (got,) = results["b_full"]  # the new incarnation: all of phase 2, as the local edge
    assert got == list(range(last - 19, last + 1))
    assert set(got) <= set(results["c_all"][0])
    e = final.components["b_full"].edges["a_src:default"]
    assert e["rejected"] == 0 and e["arrived"] == e["executed"] == 20
