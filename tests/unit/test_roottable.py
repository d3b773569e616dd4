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
BASE = (1 << 59) + 7

keys = st.one_of(
    st.integers(0, 400).map(lambda k: BASE + STEP * k),  # on the counter's steps
    st.integers(0, 400).map(lambda k: BASE + STEP * k + 1),  # between them
    st.integers(-(1 << 70), 1 << 70),  # anywhere, negative, past 64 bits
    st.sampled_from(["s", b"b", 2.5, (1, 2), True]),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("run"), st.integers(0, 400), st.integers(1, 300)),  # emits
        st.tuples(st.just("pop_run"), st.integers(0, 400), st.integers(1, 300)),
        st.tuples(st.just("set"), keys, st.integers()),
        st.tuples(st.just("pop"), keys),
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("del"), keys),
        st.tuples(st.just("clear")),
    ),
    max_size=60,
)


def same(t, d: dict) -> None:
    assert len(t) == len(d)
    assert sorted(t.items(), key=repr) == sorted(d.items(), key=repr)
    assert sorted(t.keys(), key=repr) == sorted(d.keys(), key=repr)
    assert sorted(t.values()) == sorted(d.values())
    assert sorted(t, key=repr) == sorted(d, key=repr)


@settings(max_examples=400, deadline=None)
@given(ops)
def test_a_root_table_is_the_dict_it_stands_for(script):
    t, d = RootTable(STEP), {}
    for op in script:
        kind = op[0]
        if kind == "run":
            for k in range(op[1], op[1] + op[2]):
                t[BASE + STEP * k] = d[BASE + STEP * k] = k
        elif kind == "pop_run":
            for k in range(op[1], op[1] + op[2]):
                assert t.pop(BASE + STEP * k, None) == d.pop(BASE + STEP * k, None)
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
        same(t, d)


def test_a_tree_that_stays_does_not_pin_the_window():
    """One root never completes while a million after it do: the window's older half
    moves beside it once it is mostly empty, so the array stays small (its size shows
    in sys.getsizeof? no: in how fast pops stay; here, in what the table still holds)."""
    t = RootTable(1)
    t[BASE] = "stuck"
    for k in range(1, 1_000_000):
        t[BASE + k] = k
        if k > 10:
            assert t.pop(BASE + k - 10) == k - 10
    assert t[BASE] == "stuck" and len(t) == 11
    assert repr(t).endswith("1 beside it>")  # the stuck one moved out of the window


def test_values_are_released_and_nothing_leaks():
    class V:
        pass

    t = RootTable(2)
    v = V()
    before = sys.getrefcount(v)
    for k in range(5000):
        t[BASE + 2 * k] = v
    for k in range(0, 5000, 2):
        t.pop(BASE + 2 * k)
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
    t[BASE] = v
    w = weakref.ref(v)
    del t, v
    gc.collect()
    assert w() is None


def test_a_step_of_zero_is_refused():
    with pytest.raises(ValueError, match="step"):
        RootTable(0)
