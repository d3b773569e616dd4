"""Nimbus's decisions as scenarios: a pure function of what nimbus
knows, so each case is a few lines, no process, no socket, a clock that is a number."""

from __future__ import annotations

from stormish.cluster import decide as dc


def view(topologies, supervisors=None, hellos=None, now=100.0, timeout=30.0):
    return dc.View(now, timeout, supervisors or {"s0": 99.0, "s1": 99.0}, topologies, hellos or {})


def hello(pid, state, heard=99.5):
    return dc.HelloSeen(pid, state, heard)


def test_a_new_topology_is_placed_then_started_once_every_worker_said_hello():
    t = dc.TopologyView("wc", "starting", 2, {})
    assert dc.decide(view([t])) == [dc.Place("wc", (0, 1))]
    placed = dc.TopologyView("wc", "starting", 2, {0: "s0", 1: "s1"})
    # a slow worker: one hello so far, nothing to do but wait
    assert dc.decide(view([placed], hellos={("wc", 0): hello(10, "new")})) == []
    both = {("wc", 0): hello(10, "new"), ("wc", 1): hello(11, "new")}
    assert dc.decide(view([placed], hellos=both)) == [dc.Start("wc", ((0, "new"), (1, "new")))]


def test_not_enough_slots_keeps_asking_to_place_the_missing_worker_only():
    t = dc.TopologyView("wc", "starting", 3, {0: "s0", 1: "s1"})
    hellos = {("wc", 0): hello(10, "new"), ("wc", 1): hello(11, "new")}
    assert dc.decide(view([t], hellos=hellos)) == [dc.Place("wc", (2,))]  # never a Start


def test_a_lost_supervisor_is_forgotten_and_its_workers_placed_elsewhere_in_the_same_step():
    t = dc.TopologyView("wc", "running", 2, {0: "s0", 1: "s1"}, known_pids={0: 10, 1: 11})
    hellos = {("wc", 0): hello(10, "running"), ("wc", 1): hello(11, "running", heard=60.0)}
    got = dc.decide(view([t], supervisors={"s0": 99.0, "s1": 60.0}, hellos=hellos))
    assert got == [dc.ForgetSupervisor("s1"), dc.Place("wc", (1,)), dc.CheckCompletion("wc")]


def test_a_worker_its_supervisor_restarted_is_brought_up_and_one_running_is_adopted():
    t = dc.TopologyView("wc", "running", 3, {0: "s0", 1: "s1", 2: "s1"},
                        known_pids={0: 10, 1: 11, 2: 12})  # fmt: skip
    hellos = {
        ("wc", 0): hello(10, "running"),  # the same process: nothing to do
        ("wc", 1): hello(21, "new"),  # restarted by its supervisor
        ("wc", 2): hello(22, "running"),  # a new pid already running: nimbus restarted
    }
    assert dc.decide(view([t], hellos=hellos)) == [
        dc.BringUp("wc", 1, 21, "new"),
        dc.Adopt("wc", 2, 22),
        dc.CheckCompletion("wc"),
    ]


def test_after_a_nimbus_restart_every_running_worker_is_adopted_not_restarted():
    """A restored topology knows no pid: each hello of a running worker is adopted."""
    t = dc.TopologyView("wc", "running", 2, {0: "s0", 1: "s1"}, known_pids={0: None, 1: None})
    hellos = {("wc", 0): hello(10, "running"), ("wc", 1): hello(11, "running")}
    assert dc.decide(view([t], hellos=hellos)) == [
        dc.Adopt("wc", 0, 10), dc.Adopt("wc", 1, 11), dc.CheckCompletion("wc")
    ]  # fmt: skip


def test_a_stale_hello_announces_nothing_and_kills_end_at_their_time():
    t = dc.TopologyView("wc", "running", 1, {0: "s0"}, kill_at=100.0, known_pids={0: 10})
    old = {("wc", 0): hello(33, "new", heard=90.0)}  # older than STALE_HELLO
    assert dc.decide(view([t], hellos=old)) == [dc.End("wc", "killed")]
    later = dc.TopologyView("wc", "running", 1, {0: "s0"}, kill_at=200.0, known_pids={0: 10})
    assert dc.decide(view([later])) == [dc.CheckCompletion("wc")]
    never_ran = dc.TopologyView("wc", "starting", 1, {}, kill_at=0.0)
    assert dc.decide(view([never_ran])) == [dc.End("wc", "killed")]
    assert dc.decide(view([dc.TopologyView("wc", "complete", 1, {})])) == []


def test_a_worker_whose_slot_port_failed_moves_and_is_placed_again_not_failed():
    """Another program took the port of worker 1's slot on s1 (its
    supervisor reported it): the worker lets go of that slot and is placed again."""
    t = dc.TopologyView("wc", "starting", 2, {0: "s0", 1: "s1"}, ports={0: 6700, 1: 6700})
    v = dc.View(100.0, 30.0, {"s0": 99.0, "s1": 99.0}, [t], {}, {"s1": frozenset({6700})})
    assert dc.decide(v) == [dc.Move("wc", (1,)), dc.Place("wc", (1,))]
    # a running one the same way; another port failing on s1 moves nothing
    r = dc.TopologyView("wc", "running", 2, {0: "s0", 1: "s1"}, known_pids={0: 1, 1: 2},
                        ports={0: 6700, 1: 6701})  # fmt: skip
    v = dc.View(100.0, 30.0, {"s0": 99.0, "s1": 99.0}, [r], {}, {"s1": frozenset({6700})})
    assert dc.decide(v) == [dc.CheckCompletion("wc")]
    v = dc.View(100.0, 30.0, {"s0": 99.0, "s1": 99.0}, [r], {}, {"s1": frozenset({6701})})
    assert dc.decide(v) == [dc.Move("wc", (1,)), dc.Place("wc", (1,)), dc.CheckCompletion("wc")]


def test_a_rebalance_runs_when_its_wait_is_over_and_a_kill_wins_over_it():
    """Storm's REBALANCING: the spouts wait deactivated, then the workers restart; a
    kill during the wait ends the topology instead."""
    waiting = dc.TopologyView("wc", "running", 1, {0: "s0"}, rebalance_at=200.0, known_pids={0: 10})
    assert dc.decide(view([waiting])) == [dc.CheckCompletion("wc")]
    due = dc.TopologyView("wc", "running", 1, {0: "s0"}, rebalance_at=100.0, known_pids={0: 10})
    assert dc.decide(view([due])) == [dc.Rebalance("wc")]
    killed = dc.TopologyView(
        "wc", "running", 1, {0: "s0"}, kill_at=100.0, rebalance_at=100.0, known_pids={0: 10}
    )
    assert dc.decide(view([killed])) == [dc.End("wc", "killed")]
