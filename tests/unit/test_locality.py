"""Locality-aware shuffle (Storm 2's LoadAwareShuffleGrouping): scope transitions and rings.

Pure: loads in, scope and ring out. The model below is Storm's `transition` written
out literally (a scope's targets are its own and every narrower scope's; an empty scope
widens at once; above the higher bound widen one; the narrower scope under the lower
bound narrows one), run over the scopes that have targets of their own.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stormish.runtime import locality as loc
from stormish.runtime.grouping import Shuffle
from stormish.runtime.queue import ReceiveQueue

W, H, E = loc.WORKER_LOCAL, loc.HOST_LOCAL, loc.EVERYTHING
HIGHER, LOWER = 0.8, 0.2


def storm_transition(current, levels, groups, load, higher=HIGHER, lower=LOWER):
    """LoadAwareShuffleGrouping.transition over the ordered scope enum `levels`;
    `groups`: scope -> the targets of exactly that scope."""

    def in_scope(s):
        return [t for lv in levels[: levels.index(s) + 1] for t in groups.get(lv, [])]

    def up(s):
        return levels[min(levels.index(s) + 1, len(levels) - 1)]

    def down(s):
        return levels[max(levels.index(s) - 1, 0)]

    targets = in_scope(current)
    if not targets:
        assert up(current) != current, "no target in any scope"
        return storm_transition(up(current), levels, groups, load, higher, lower)
    if sum(min(1.0, load[t]) for t in targets) / len(targets) > higher:
        return up(current)
    narrower = in_scope(down(current))
    if narrower and sum(min(1.0, load[t]) for t in narrower) / len(narrower) < lower:
        return down(current)
    return current


scopes_st = st.lists(st.sampled_from([W, H, E]), min_size=2, max_size=6)
load_st = st.floats(0.0, 1.2, allow_nan=False)


@given(scopes_st, st.data())
def test_the_scope_follows_storms_transition(scopes, data):
    present = sorted(set(scopes))
    groups = {s: [i for i, x in enumerate(scopes) if x == s] for s in present}
    model = storm_transition(present[0], present, groups, [0.0] * len(scopes))  # prepare
    scope = loc.initial_scope(scopes)
    assert scope == model == present[0]
    for _ in range(data.draw(st.integers(1, 12))):
        loads = data.draw(st.lists(load_st, min_size=len(scopes), max_size=len(scopes)))
        model = storm_transition(model, present, groups, loads)
        scope = loc.next_scope(scope, scopes, loads, HIGHER, LOWER)
        assert scope == model


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@given(scopes_st, st.data())
def test_the_shuffle_moves_as_storm_except_that_a_spill_finding_no_room_ends(scopes, data):
    """Shuffle.refresh: Storm's transition, but never widening into targets averaging
    above the higher bound, narrowing when a widened scope's added targets go above it,
    and no widening during the hold-off that follows."""
    clock = FakeClock()
    sh = Shuffle(list(range(len(scopes))), scopes, (HIGHER, LOWER), clock=clock)
    for _ in range(data.draw(st.integers(1, 12))):
        clock.t += data.draw(st.sampled_from([0.0, 0.01, 0.1, 1.0, 5.0]))
        loads = data.draw(st.lists(load_st, min_size=len(scopes), max_size=len(scopes)))
        before, held = sh.scope, clock.t < sh.hold_until
        storm = loc.next_scope(before, scopes, loads, HIGHER, LOWER)
        sh.refresh(loads)
        # a whole ring (at most 11 slots a target): a full target has 1 slot in it
        in_scope = {i for i, s in enumerate(scopes) if s <= sh.scope}
        assert set(picks(sh, 11 * len(scopes))) == in_scope
        if storm < before:
            assert sh.scope == storm  # narrowing as Storm
        elif storm > before:
            full = loc.no_room(storm, scopes, loads, HIGHER)
            assert sh.scope == (before if held or full else storm)
        elif loc.no_room(before, scopes, loads, HIGHER):
            assert sh.scope < before and sh.hold_until > clock.t
        else:
            assert sh.scope == before


def test_a_spill_that_finds_no_room_narrows_and_holds_off_doubling():
    clock = FakeClock()
    sh = Shuffle(["local", "remote"], [W, E], clock=clock)
    sh.refresh([1.0, 0.0])
    assert sh.scope == E  # spilled
    sh.refresh([1.0, 1.0])  # the other worker is backpressured too: no room there
    assert sh.scope == W and sh.hold_until == 0.05
    sh.refresh([1.0, 0.0])
    assert sh.scope == W  # held off
    clock.t = 0.06
    sh.refresh([1.0, 0.0])
    assert sh.scope == E
    sh.refresh([1.0, 1.0])
    assert sh.scope == W and sh.hold_until == pytest.approx(0.06 + 0.1)  # doubled
    clock.t = 1.0
    sh.refresh([1.0, 1.0])
    assert sh.scope == W  # never widens into backpressured targets
    sh.refresh([1.0, 0.0])
    assert sh.scope == E
    sh.refresh([0.1, 0.0])  # the local task has room again: the hold-off starts over
    assert sh.scope == W and sh.hold == 0.05


@given(st.lists(st.sampled_from([W, H, E]), min_size=1, max_size=6), st.data())
def test_with_every_scope_present_it_is_storms_transition_exactly(extra, data):
    scopes = [W, H, E, *extra]
    groups = {s: [i for i, x in enumerate(scopes) if x == s] for s in (W, H, E)}
    scope = W
    for _ in range(data.draw(st.integers(1, 8))):
        loads = data.draw(st.lists(load_st, min_size=len(scopes), max_size=len(scopes)))
        want = storm_transition(scope, [W, H, E], groups, loads)
        assert loc.next_scope(scope, scopes, loads, HIGHER, LOWER) == want
        scope = want


@given(scopes_st, st.data())
def test_the_ring_holds_exactly_the_targets_in_scope_and_favours_the_idle(scopes, data):
    loads = data.draw(st.lists(load_st, min_size=len(scopes), max_size=len(scopes)))
    scope = data.draw(st.sampled_from(sorted(set(scopes))))
    r = loc.ring(scopes, loads, scope)
    assert set(r) == {i for i, s in enumerate(scopes) if s <= scope}
    count = {i: r.count(i) for i in set(r)}
    for i in count:
        for j in count:
            if min(10, int(loads[i] * 10)) < min(10, int(loads[j] * 10)):
                assert count[i] > count[j]


def test_equal_loads_are_round_robin_over_the_scope():
    assert loc.ring([W, E, W, E], [0.5] * 4, W) == [0, 2]
    assert loc.ring([W, E, W, E], [0.5] * 4, E) == [0, 1, 2, 3]


# -- scenarios: one local task, one remote task (a 2-worker shuffle) ---------------------
def picks(sh, n=24):
    return {sh.pick_next() for _ in range(n)}


def test_a_local_task_that_keeps_up_takes_everything():
    sh = Shuffle(["local", "remote"], [W, E])
    assert picks(sh) == {"local"} and sh.width == 1
    for load in (0.0, 0.5, 0.8):  # at the bound is not above it
        sh.refresh([load, 0.0])
        assert sh.scope == W and picks(sh) == {"local"}


def test_a_backpressured_local_task_spills_across_and_narrows_again_below_the_lower_bound():
    sh = Shuffle(["local", "remote"], [W, E])
    sh.refresh([0.9, 0.0])
    assert sh.scope == E and picks(sh) == {"local", "remote"} and sh.width == 2
    ring = [sh.pick_next() for _ in range(12)]
    assert ring.count("remote") > ring.count("local")  # weighted by free capacity
    sh.refresh([0.5, 0.0])  # between the bounds: stays wide (hysteresis)
    assert sh.scope == E
    sh.refresh([0.1, 1.0])  # the narrower scope is below the lower bound
    assert sh.scope == W and picks(sh) == {"local"}


def test_storms_rule_keeps_a_widened_scope_while_everything_is_loaded():
    assert loc.next_scope(E, [W, E], [1.0, 1.0], HIGHER, LOWER) == E  # (the Shuffle ends it)


def test_host_local_comes_before_everything():
    sh = Shuffle(["w", "h", "e"], [W, H, E])
    sh.refresh([1.0, 0.0, 0.0])
    assert sh.scope == H and picks(sh) == {"w", "h"}
    sh.refresh([1.0, 1.0, 0.0])
    assert sh.scope == E and picks(sh) == {"w", "h", "e"}


def test_no_local_target_starts_wide():
    sh = Shuffle(["a", "b"], [E, E])
    assert sh.scope == E and picks(sh) == {"a", "b"}


def test_load_aware_off_is_plain_round_robin_over_every_target():
    sh = Shuffle(["local", "remote", "r2"], [W, E, E], load_aware=False)
    assert [sh.pick_next() for _ in range(6)] == ["local", "remote", "r2"] * 2
    before = sh.pick_next
    sh.refresh([1.0, 0.0, 0.0])
    assert sh.pick_next is before


def test_a_local_producer_reads_a_remote_fed_queue_against_its_own_limit():
    q = ReceiveQueue(100, remote_reserve=50)
    assert q.try_publish((0, "s", [0] * 45, None), 45)
    assert q.load() == 0.9  # 45 of the 50 local producers may fill
    q.publish_remote((0, "s", [0] * 60, None), 60)  # past capacity: the overflowQ
    assert q.load() == 1.0
