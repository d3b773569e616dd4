"""RotatingMap: bucketed expiry, touch, and agreement with a simple model."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.runtime.rotating import RotatingMap


@pytest.mark.parametrize("buckets", [0, 1])
def test_needs_two_buckets(buckets):
    with pytest.raises(ValueError, match="2 buckets"):
        RotatingMap(buckets)


def test_put_get_pop_contains_len():
    m = RotatingMap()
    assert m.get("a") is None
    assert m.get("a", 5) == 5
    m.put("a", 1)
    m.put("b", 2)
    assert m.get("a") == 1
    assert "a" in m and "zz" not in m
    assert len(m) == 2
    assert m.pop("a") == 1
    assert m.pop("a", "gone") == "gone"
    assert "a" not in m
    assert len(m) == 1


@pytest.mark.parametrize("buckets", [2, 3, 4])
def test_entry_expires_exactly_at_the_bucket_count_rotation(buckets):
    m = RotatingMap(buckets)
    m.put("k", "v")
    for _ in range(buckets - 1):
        assert m.rotate() == {}
        assert m.get("k") == "v"
    assert m.rotate() == {"k": "v"}
    assert "k" not in m
    assert len(m) == 0


def test_put_of_an_existing_key_moves_it_to_the_newest_bucket_without_duplicating():
    m = RotatingMap(3)
    m.put("k", 1)
    m.rotate()
    m.rotate()
    m.put("k", 2)
    assert len(m) == 1
    assert m.rotate() == {}  # the old copy is not resurrected by expiry
    assert m.rotate() == {}
    assert m.rotate() == {"k": 2}


def test_put_new_stores_in_the_newest_bucket():
    m = RotatingMap(2)
    m.put_new("k", 1)
    assert m.get("k") == 1
    assert m.rotate() == {}
    assert m.rotate() == {"k": 1}


def test_touch_resets_an_entrys_life():
    m = RotatingMap(3)
    m.put("k", "v")
    m.rotate()
    m.rotate()
    assert m.touch("k") is True
    assert m.rotate() == {}
    assert m.rotate() == {}
    assert m.rotate() == {"k": "v"}


def test_touch_of_newest_and_absent_keys():
    m = RotatingMap(3)
    m.put("k", "v")
    assert m.touch("k") is True
    assert m.touch("missing") is False
    assert "missing" not in m


def test_items_lists_every_live_entry():
    m = RotatingMap(3)
    m.put("a", 1)
    m.rotate()
    m.put("b", 2)
    assert dict(m.items()) == {"a": 1, "b": 2}


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 5), st.integers()),
        st.tuples(st.just("pop"), st.integers(0, 5)),
        st.tuples(st.just("touch"), st.integers(0, 5)),
        st.tuples(st.just("rotate")),
    ),
    max_size=60,
)


@settings(max_examples=120, deadline=None)
@given(buckets=st.integers(2, 5), ops=OPS)
def test_agrees_with_an_age_model(buckets, ops):
    """Model: key -> (value, rotations since last put/touch); expires when age == buckets."""
    m = RotatingMap(buckets)
    model: dict[int, list] = {}
    for op in ops:
        if op[0] == "put":
            m.put(op[1], op[2])
            model[op[1]] = [op[2], 0]
        elif op[0] == "pop":
            expected = model.pop(op[1], [None])[0]
            assert m.pop(op[1]) == expected
        elif op[0] == "touch":
            assert m.touch(op[1]) == (op[1] in model)
            if op[1] in model:
                model[op[1]][1] = 0
        else:
            for entry in model.values():
                entry[1] += 1
            dead = {k: v for k, (v, age) in model.items() if age >= buckets}
            for k in dead:
                del model[k]
            assert m.rotate() == dead
        assert len(m) == len(model)
        assert dict(m.items()) == {k: v for k, (v, _) in model.items()}


def test_pop_found_pops_each_key_found_in_order_and_skips_the_rest():
    m = RotatingMap(3)
    m.put("old", 1)
    m.rotate()
    m.put("new", 2)
    m.put("mid", 3)
    assert m.pop_found(["new", "gone", "old", "new"]) == [2, 1]
    assert len(m) == 1 and m.get("mid") == 3


def test_renew_moves_an_entry_to_the_newest_bucket_and_returns_it():
    m = RotatingMap(2)
    m.put("k", "v")
    m.rotate()
    assert m.renew("k") == "v"
    assert m.rotate() == {}  # renewed: it lives two more rotations
    assert m.renew("zz") is None
    assert m.rotate() == {"k": "v"}
