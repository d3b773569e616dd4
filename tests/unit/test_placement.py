"""Which supervisor slot runs which worker: spread, deterministic, partial when full."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stormish.cluster.placement import free_slots, schedule


def test_workers_spread_over_supervisors_before_sharing_one():
    placed = schedule([0, 1, 2], {"a": [6700, 6701], "b": [6700, 6701], "c": [6700]})
    assert sorted(s for s, _ in placed.values()) == ["a", "b", "c"]


def test_the_answer_is_deterministic_and_takes_the_lowest_port():
    free = {"b": [6702, 6701], "a": [6703, 6700]}
    assert schedule([0], free) == {0: ("a", 6700)}
    assert schedule([0, 1], free) == schedule([1, 0], dict(reversed(free.items())))


def test_what_does_not_fit_waits():
    assert schedule([0, 1, 2], {"a": [1]}) == {0: ("a", 1)}
    assert schedule([0], {}) == {}


def test_free_slots_leave_out_what_workers_hold():
    offered = {"a": [1, 2], "b": [1]}
    assert free_slots(offered, [("a", 2), ("b", 1)]) == {"a": [1], "b": []}


@given(
    st.lists(st.integers(0, 50), unique=True, max_size=20),
    st.dictionaries(st.sampled_from("abcde"), st.lists(st.integers(1, 9), unique=True)),
)
def test_no_slot_is_given_twice_and_placement_is_maximal(indices, free):
    placed = schedule(indices, free)
    slots = list(placed.values())
    assert len(slots) == len(set(slots))
    assert all(port in free[sid] for sid, port in slots)
    assert len(placed) == min(len(indices), sum(len(p) for p in free.values()))


def test_two_supervisors_on_one_host_share_its_ports():
    """Both left at the default ports, two supervisors on one host
    were each given port 6700, and the second worker could not listen. A port is the
    host's: one placing gives it once, and a worker holding it takes it from both."""
    from stormish.cluster.placement import shared_ports

    offered = {"a": [6700, 6701], "b": [6700, 6701], "c": [6700]}
    hosts = {"a": "h1", "b": "h1", "c": "h2"}
    placed = schedule([0, 1, 2], free_slots(offered, [], hosts), hosts)
    on_host = [(hosts[sid], port) for sid, port in placed.values()]
    assert len(set(on_host)) == 3, placed
    free = free_slots(offered, [("a", 6700)], hosts)
    assert free == {"a": [6701], "b": [6701], "c": [6700]}
    assert schedule([0, 1], free, hosts) in (
        {0: ("a", 6701), 1: ("c", 6700)}, {0: ("b", 6701), 1: ("c", 6700)},
        {0: ("c", 6700), 1: ("a", 6701)}, {0: ("c", 6700), 1: ("b", 6701)},
    )  # fmt: skip
    assert shared_ports(offered, hosts) == {("h1", 6700): ["a", "b"], ("h1", 6701): ["a", "b"]}
    assert shared_ports(offered, {"a": "h1", "b": "h2", "c": "h3"}) == {}


def test_a_failed_port_is_not_offered():
    offered = {"a": [6700, 6701], "b": [6700]}
    assert free_slots(offered, [], failed={"a": [6700]}) == {"a": [6701], "b": [6700]}
