"""Both execution models (topology.worker.scheduler: cooperative, the default, and
threads, Storm's) keep every guarantee: exact results with acking, backpressure that
stops a spout and releases it (tests/integration/test_engine.py, both models), and user
code that blocks."""

from __future__ import annotations

import threading

import pytest

from stormish import BasicBolt, LocalCluster, Topology
from stormish.testing import CaptureBolt, ListSpout, poll_for, run_topology

from .parts import CountingSpout

pytestmark = pytest.mark.timeout(120)
MODELS = ["cooperative", "threads"]


class Gate:
    event = threading.Event()
    entered = threading.Event()


class Blocked(BasicBolt):
    """Blocks in execute until the test opens the gate (as a bolt stuck in I/O)."""

    def execute(self, tup):
        Gate.entered.set()
        Gate.event.wait(30)


class Fails3(BasicBolt):
    """Fails every value that is a multiple of 7 once (a replay must fix it)."""

    outputs = ["v"]

    def prepare(self, conf, context):
        self.seen = set()

    def execute(self, tup):
        v = tup.values[0]
        if v % 7 == 0 and v not in self.seen:
            self.seen.add(v)
            raise ValueError(f"first try of {v}")
        self.emit((v,))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("workers", [1, 2])
def test_reliable_run_is_exact_under_either_model(model, workers):
    n = 3000
    t = Topology(
        "exact",
        config={
            "topology.worker.scheduler": model,
            "topology.workers": workers,
            "topology.message.timeout.secs": 5,
        },
    )
    t.set_spout("s", ListSpout([(i,) for i in range(n)]))
    t.set_bolt("f", Fails3(), parallelism=2).shuffle_grouping("s")
    t.set_bolt("cap", CaptureBolt(), parallelism=2).fields_grouping("f", ["v"])
    out = run_topology(t, timeout=90)
    got = sorted(v for part in out.results["cap"] for (v,) in part)
    acked = {k for part in out.results["s"] for k in part["acked"]}
    assert acked == set(range(n))
    assert set(got) == set(range(n))  # at least once: replays may repeat a few


@pytest.mark.parametrize(
    "conf",
    [
        {"topology.worker.scheduler": "threads"},
        {},  # cooperative: the watchdog moves the blocked bolt to its own thread
        {"topology.scheduler.blocking.millis": 0},  # no watchdog: declared below
    ],
    ids=["threads", "detected", "declared"],
)
def test_a_bolt_blocked_in_user_code_never_stops_its_siblings(conf):
    Gate.event.clear()
    Gate.entered.clear()
    t = Topology("iso", config={"topology.acker.executors": 0, **conf})
    t.set_spout("a", CountingSpout(1000, per_call=50))
    t.set_spout("b", CountingSpout(5000, per_call=50))
    blocked = t.set_bolt("blocked", Blocked()).shuffle_grouping("a")
    if "topology.scheduler.blocking.millis" in conf:
        blocked.add_configuration("topology.executor.own.thread", True)
    t.set_bolt("free", CaptureBolt()).shuffle_grouping("b")
    try:
        with LocalCluster() as c:
            c.submit(t)
            assert Gate.entered.wait(20), "the blocked bolt never ran"
            poll_for(
                lambda: c.statistics("iso").components["free"].executed == 5000,
                timeout=20,
                what="the sibling to finish while the other is blocked",
            )
            assert c.statistics("iso").components["blocked"].executed == 0
            Gate.event.set()
            final = c.wait_complete("iso", timeout=60)
    finally:
        Gate.event.set()
    assert final.components["blocked"].executed == 1000
    assert final.components["free"].executed == 5000


class BlockedOnFile(BasicBolt):
    """Blocks in execute until a file appears (a bolt stuck in I/O, in a worker process,
    where the test's in-process gate cannot reach)."""

    def __init__(self, path: str):
        self.path = path

    def execute(self, tup):
        import os
        import time

        while not os.path.exists(self.path):
            time.sleep(0.01)  # the user's blocking I/O, not the test's synchronisation


def test_a_blocked_bolt_hands_the_link_to_the_scheduler_that_takes_over(tmp_path):
    """Two workers: the worker's scheduler thread serves the ZeroMQ link between turns.
    When the watchdog moves a blocked bolt off it, the link must go with the other
    executors, or tuples from the other worker stop arriving (`d` is fed only from `c`
    on the other worker: components are dealt to workers in name order)."""
    gate = tmp_path / "open"
    t = Topology("iso2", config={"topology.acker.executors": 0, "topology.workers": 2})
    t.set_spout("a", CountingSpout(100, per_call=10))  # worker 0
    t.set_bolt("b", BlockedOnFile(str(gate))).shuffle_grouping("a")  # worker 1
    t.set_spout("c", CountingSpout(5000, per_call=50))  # worker 0
    t.set_bolt("d", CaptureBolt()).shuffle_grouping("c")  # worker 1, beside b
    with LocalCluster(workers=2) as cl:
        cl.submit(t)
        stats = cl.statistics("iso2")
        assert stats.tasks[2].worker == stats.tasks[4].worker == 1
        poll_for(
            lambda: cl.statistics("iso2").components["d"].executed == 5000,
            timeout=30,
            what="the bolt beside the blocked one to get every tuple from the other worker",
        )
        assert cl.statistics("iso2").components["b"].executed == 0
        gate.write_text("")
        final = cl.wait_complete("iso2", timeout=60)
    assert final.components["b"].executed == 100
    assert final.components["d"].executed == 5000


@pytest.mark.parametrize("model", MODELS)
def test_a_topology_submitted_inactive_opens_nothing_until_activated(model):
    t = Topology("late", config={"topology.worker.scheduler": model})
    t.set_spout("s", ListSpout([(i,) for i in range(100)]))
    t.set_bolt("cap", CaptureBolt()).shuffle_grouping("s")
    with LocalCluster() as c:
        c.submit(t, active=False)
        st = c.statistics("late")
        assert st.components["s"].emitted == 0
        c.activate("late")
        final = c.wait_complete("late", timeout=60)
    assert final.components["cap"].executed == 100
