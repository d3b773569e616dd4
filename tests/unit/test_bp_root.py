"""The backpressure root over hand-made statistics: the rule, not the engine."""

from __future__ import annotations

from stormish.runtime.bp_root import backpressure_roots, cycle_note, describe
from stormish.runtime.stats import TaskStats


def task(n, comp, pop=0, cap=100, parked=0.0, pending=0, overflow=0, announced=False,
         kind="bolt", bp=0.0):  # fmt: skip
    return TaskStats(
        task=n, component=comp, worker=n % 2, kind=kind, receive_population=pop,
        receive_capacity=cap, parked_seconds=parked, pending_emits=pending, overflow=overflow,
        announced_backpressure=announced, execute_latency_ms=float(n), backpressure_seconds=bp,
    )  # fmt: skip


def test_no_parked_task_means_no_root_even_with_a_full_queue():
    assert backpressure_roots([task(1, "a", pop=100), task(2, "s", kind="spout")]) == []


def test_the_full_unparked_task_is_the_root_and_the_parked_ones_are_behind_it():
    ts = [
        task(1, "s", kind="spout", parked=3.0, pending=10),
        task(2, "a", pop=100, parked=2.5, pending=5),
        task(3, "b", pop=95, parked=1.0),
        task(4, "c", pop=100),
        task(5, "d", pop=10),  # a sibling with room: not a root
    ]
    (root,) = backpressure_roots(ts)
    assert root.task.task == 4 and root.parked == ("a", "b", "s") and root.for_seconds == 3.0
    assert describe(root) == (
        "backpressure root: c task 4 on worker 0: queue 100% (100/100), execute 4.00 ms; "
        "parked behind it: a, b, s (up to 3.0s)"
    )


def test_an_overflow_or_an_announcement_makes_a_task_congested_and_the_fullest_comes_first():
    ts = [
        task(1, "s", kind="spout", parked=1.0),
        task(2, "x", pop=10, announced=True),
        task(3, "y", pop=100, overflow=400),
    ]
    assert [r.task.component for r in backpressure_roots(ts)] == ["y", "x"]
    assert "overflow 400" in describe(backpressure_roots(ts)[0])


def test_a_cycle_of_parked_full_tasks_has_no_root_and_says_so():
    ts = [task(1, "a", pop=100, parked=1.0), task(2, "b", pop=100, pending=3)]
    assert backpressure_roots(ts) == []
    assert cycle_note(ts) == (
        "backpressure with no root outside a cycle: a, b are full and parked on each other"
    )
    assert cycle_note([task(1, "a", pop=10)]) == ""


def test_a_victim_caught_between_two_parked_spells_is_not_the_root():
    """Seen on a cluster: `a` (parked most of the run) sampled with its overflow full and
    its emits flowing for a moment; `c`, which never waited on anyone, is the root."""
    ts = [
        task(1, "s", kind="spout", parked=2.0, pending=5, bp=9.0),
        task(2, "a", pop=0, overflow=1292, bp=8.5),  # flowing this instant
        task(3, "b", pop=64, cap=64, parked=1.0, bp=8.0),
        task(4, "c", pop=64, cap=64, bp=0.0),
    ]
    assert [r.task.component for r in backpressure_roots(ts)] == ["c"]
