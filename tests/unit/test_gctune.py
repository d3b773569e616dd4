"""GC thresholds held while topologies run in this process, restored after the last."""

from __future__ import annotations

import gc

import pytest

from stormish.runtime import gctune


@pytest.fixture(autouse=True)
def keep_thresholds():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_hold_raises_the_first_threshold_and_the_last_release_restores():
    gc.set_threshold(700, 10, 10)
    assert gctune.hold(50_000)
    assert gc.get_threshold() == (50_000, 20, 20)
    assert gctune.hold(10_000)  # a second topology: never lowered
    assert gc.get_threshold() == (50_000, 20, 20)
    gctune.release()
    assert gc.get_threshold() == (50_000, 20, 20)  # one still runs
    gctune.release()
    assert gc.get_threshold() == (700, 10, 10)
    gctune.release()  # unbalanced: harmless
    assert gc.get_threshold() == (700, 10, 10)


def test_zero_leaves_the_interpreter_alone():
    gc.set_threshold(700, 10, 10)
    assert not gctune.hold(0)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_disabled_gc_stays_disabled():
    gc.set_threshold(0)
    assert gctune.hold(50_000)
    assert gc.get_threshold()[0] == 0
    gctune.release()
    assert gc.get_threshold()[0] == 0


def test_a_local_cluster_holds_while_it_runs_and_restores_after():
    from stormish import Topology
    from stormish.testing import ListSpout, run_topology

    gc.set_threshold(700, 10, 10)
    t = Topology("gc", config={"topology.worker.gc.threshold": 123_456})

    class Probe(ListSpout):  # a copy runs per task: it reports through result()
        def next_tuple(self):
            self.seen = gc.get_threshold()[0]
            super().next_tuple()

        def result(self):
            return self.seen

    t.set_spout("s", Probe([(1,), (2,)]))
    out = run_topology(t, timeout=30)
    assert out.results["s"] == [123_456]
    assert gc.get_threshold() == (700, 10, 10)
