"""The compiled in-flight bucket (stormish/_roottable.h) against its twin, a dict: the
same operations, the same mapping after every one. Roots mostly come in steps of the
table's step from one start and mostly leave in order, so the strategies make those
runs, with stragglers, gaps, other steps, negative and huge ints, other key types and
clears mixed in (each of RootTable's paths: the window, a gap, extra, the spill of a
sparse window's older half, an emptied window starting again)."""

from __future__ import annotations

import gc
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.runtime import fastack

RootTable = fastack.RootTable
pytestmark = pytest.mark.skipif(
    RootTable is None, reason="stormish._acking is not built here (no C compiler)"
)

STEP = 3
LOW = (1 << 59) + 7
HIGH = (1 << 63) - 1 - STEP * 6000  # a counter of many ackers may start past 2^63 - ...
K = 4000

keys = st.one_of(
    st.integers(0, K).map(lambda k: LOW + STEP * k),  # on the counter's steps
    st.integers(0, K).map(lambda k: LOW + STEP * k + 1),  # between them
    st.integers(0, K).map(lambda k: HIGH + STEP * k),  # across 2^63
    st.integers(-(1 << 70), 1 << 70),  # anywhere, negative, past 64 bits
    st.sampled_from(["s", b"b", 2.5, (1, 2)]),  # (not True: an int subclass is kept apart)
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("run"), st.integers(0, K), st.integers(1, 2000)),  # emits
        st.tuples(st.just("pop_run"), st.integers(0, K), st.integers(1, 2000)),
        # a run's trees complete but every m-th: stragglers pin the window's start
        st.tuples(
            st.just("stragglers"), st.integers(0, K), st.integers(200, 2000), st.integers(2, 50)
        ),  # fmt: skip
        # a root past the window's end by about the gap the array still fills
        st.tuples(st.just("jump"), st.integers(1020, 1030)),
        st.tuples(st.just("set"), keys, st.integers()),
        st.tuples(st.just("pop"), keys),
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("del"), keys),
        st.tuples(st.just("clear")),
    ),
    max_size=40,
)


def same(t, d: dict) -> None:
    assert len(t) == len(d)
    assert sorted(t.items(), key=repr) == sorted(d.items(), key=repr)
    assert sorted(t.keys(), key=repr) == sorted(d.keys(), key=repr)
    assert sorted(t.values(), key=repr) == sorted(d.values(), key=repr)
    assert sorted(t, key=repr) == sorted(d, key=repr)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_a_root_table_is_the_dict_it_stands_for(script):
    for base in (LOW, HIGH):
        t, d = RootTable(STEP), {}
        for op in script:
            play(t, d, op, base)
            same(t, d)


def play(t, d: dict, op: tuple, base: int) -> None:
    kind = op[0]
    if kind == "run":
        for k in range(op[1], op[1] + op[2]):
            t[base + STEP * k] = d[base + STEP * k] = k
    elif kind == "pop_run":
        for k in range(op[1], op[1] + op[2]):
            assert t.pop(base + STEP * k, None) == d.pop(base + STEP * k, None)
    elif kind == "stragglers":
        _, start, n, m = op
        for k in range(start, start + n):
            t[base + STEP * k] = d[base + STEP * k] = k
        for k in range(start, start + n):
            if k % m:
                assert t.pop(base + STEP * k, None) == d.pop(base + STEP * k, None)
    elif kind == "jump":
        top = max((k for k in d if isinstance(k, int) and (k - base) % STEP == 0), default=base)
        key = top + STEP * op[1]
        t[key] = d[key] = "jumped"
    elif kind == "set":
        t[op[1]] = d[op[1]] = op[2]
    elif kind == "pop":
        assert t.pop(op[1], "gone") == d.pop(op[1], "gone")
    elif kind == "get":
        assert t.get(op[1]) == d.get(op[1])
        assert (op[1] in t) == (op[1] in d)
        if op[1] in d:
            assert t[op[1]] == d[op[1]]
        else:
            with pytest.raises(KeyError):
                t[op[1]]
    elif kind == "del":
        if op[1] in d:
            del t[op[1]], d[op[1]]
        else:
            with pytest.raises(KeyError):
                del t[op[1]]
    else:
        t.clear()
        d.clear()


def test_a_tree_that_stays_does_not_pin_the_window():
    """One root never completes while a million after it do: the window's older half
    moves beside it once it is mostly empty, so the stuck entry ends in the dict beside
    the array and the array does not grow with every emit."""
    t = RootTable(1)
    t[LOW] = "stuck"
    for k in range(1, 1_000_000):
        t[LOW + k] = k
        if k > 10:
            assert t.pop(LOW + k - 10) == k - 10
    assert t[LOW] == "stuck" and len(t) == 11
    assert repr(t).endswith("1 beside it>")  # the stuck one moved out of the window


def test_items_is_the_table_as_it_was_even_when_a_finalizer_pops_it():
    """items() makes tuples, which may run a collection and a __del__ that empties the
    table: the values it returns stay alive (this read freed memory once)."""
    t = RootTable(1)

    class Val:
        pass

    class Popper:
        def __del__(self):
            for k in list(t.keys()):
                t.pop(k)

    old = gc.get_threshold()
    gc.set_threshold(40)
    try:
        for p in range(60):
            t.clear()
            gc.collect(1)  # young objects only: a full one, 60 times, took 13 s of the suite
            for k in range(8):
                t[100 + k] = Val()
            g = Popper()
            g.me = g  # a cycle: freed by the collector, which runs inside items()
            del g
            garbage = [[] for _ in range(p)]
            out = t.items()
            assert len(out) in (0, 8) and all(isinstance(v, Val) for _, v in out)
            del out, garbage
    finally:
        gc.set_threshold(*old)


def test_clear_keeps_what_a_released_value_writes():
    t = RootTable(1)

    class Writer:
        def __del__(self):
            t[LOW + 100] = "written while clearing"

    for k in range(5):
        t[LOW + k] = Writer() if k == 2 else k
    t.clear()
    assert dict(t.items()) == {LOW + 100: "written while clearing"} and len(t) == 1


def test_unhashable_keys_raise_as_a_dict_does():
    t = RootTable(1)
    for call in (lambda: t.pop([1], None), lambda: t.get([1]), lambda: t.__setitem__([1], 2)):
        with pytest.raises(TypeError):
            call()


def test_values_are_released_and_nothing_leaks():
    class V:
        pass

    t = RootTable(2)
    v = V()
    before = sys.getrefcount(v)
    for k in range(5000):
        t[LOW + 2 * k] = v
    for k in range(0, 5000, 2):
        t.pop(LOW + 2 * k)
    t[-1] = v
    del t
    gc.collect()
    assert sys.getrefcount(v) == before


def test_a_cycle_through_a_table_is_collected():
    import weakref

    class V:
        pass

    t = RootTable(1)
    v = V()
    v.t = t
    t[LOW] = v
    w = weakref.ref(v)
    del t, v
    gc.collect()
    assert w() is None


def test_a_step_of_zero_is_refused():
    with pytest.raises(ValueError, match="step"):
        RootTable(0)
