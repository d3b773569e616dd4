"""Groupings as routers: stable hashing, fields, shuffle, partial key, all, global, custom."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.errors import TopologyError
from stormish.runtime import grouping
from stormish.runtime.grouping import (
    AckerRoute,
    All,
    Custom,
    Fields,
    Global,
    PartialKey,
    Shuffle,
    stable_hash,
)

BOXES = ["ob0", "ob1", "ob2", "ob3"]  # outboxes are opaque to routers; strings make it visible


# -- stable_hash
HASH_SAMPLES = [
    "hello",
    "héllo wörld",
    "",
    "x" * 300,
    b"bytes",
    bytearray(b"ba"),
    0,
    42,
    -7,
    2**70,
    3.5,
    -0.0,
    2.0,
    None,
    True,
    ("a", 1, None),
    ["x", 2, ("nested", b"b")],
    frozenset({"a", "b", "c", "d", "e"}),
]
_HASH_SCRIPT = """
import json, sys
from stormish.runtime.grouping import stable_hash
samples = {samples}
print(json.dumps({{"stable": [stable_hash(v) for v in samples], "builtin": hash("hello")}}))
"""


def _hashes_in_subprocess(seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    code = _HASH_SCRIPT.format(samples=repr(HASH_SAMPLES))
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_stable_hash_is_the_same_in_other_processes():
    a = _hashes_in_subprocess("1")
    b = _hashes_in_subprocess("2")
    # the seeds really change Python's own str hash, so this test could catch hash()
    assert a["builtin"] != b["builtin"]
    here = [stable_hash(v) for v in HASH_SAMPLES]
    assert a["stable"] == here
    assert b["stable"] == here


def test_stable_hash_known_values():
    import zlib

    assert stable_hash("hello") == zlib.crc32(b"hello")
    assert stable_hash(b"hello") == zlib.crc32(b"hello")
    assert stable_hash(12345) == 12345
    assert stable_hash(None) == 0


def test_stable_hash_is_non_negative():
    for v in [-1, -(2**80), -3.5, "z", ("a", -1)]:
        assert stable_hash(v) >= 0


def test_equal_keys_of_other_numeric_types_hash_equal():
    """A fields grouping sends equal keys to one task, as Storm's equals/hashCode and
    Python's dicts group them (found by a review: numpy's int64 and Decimal hashed by
    their repr, so a key emitted as 5 by one task and np.int64(5) by another was
    counted in two places)."""
    np = pytest.importorskip("numpy")
    from decimal import Decimal
    from fractions import Fraction

    pairs = [
        (5, np.int64(5)),
        (5, np.uint8(5)),
        (-3, np.int32(-3)),
        (5, Decimal(5)),
        (5, Fraction(10, 2)),
        (0.5, Fraction(1, 2)),
        (0.5, np.float32(0.5)),
        (0.5, Decimal("0.5")),
        (True, np.True_),
        (("k", 5), ("k", np.int64(5))),
    ]
    for a, b in pairs:
        assert a == b and stable_hash(a) == stable_hash(b), (a, b)


def test_equal_keys_hash_equal():
    """The routing cache is a dict: keys equal in Python must route alike."""
    assert stable_hash(1.0) == stable_hash(1)
    assert stable_hash(-0.0) == stable_hash(0)
    assert stable_hash(True) == stable_hash(1)
    assert stable_hash((1, 2.0)) == stable_hash((1.0, 2))
    assert stable_hash(frozenset({"x", "y", "z"})) == stable_hash(frozenset({"z", "y", "x"}))
    assert stable_hash({"x", "y"}) == stable_hash(frozenset({"y", "x"}))
    assert stable_hash(1.5) != stable_hash(1)


def test_stable_hash_tuple_depends_on_order():
    assert stable_hash(("a", "b")) != stable_hash(("b", "a"))
    assert stable_hash(("a", "b")) == stable_hash(["a", "b"])


def test_stable_hash_of_a_frozenset_is_stable_across_processes():
    code = (
        "from stormish.runtime.grouping import stable_hash;"
        "print(stable_hash(frozenset({'a', 'b', 'c', 'd', 'e'})))"
    )
    seen = set()
    for seed in ("1", "2", "3", "4"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        seen.add(out.stdout.strip())
    assert len(seen) == 1


# -- fields
def test_fields_same_key_same_outbox_whatever_the_other_values():
    f = Fields(BOXES, [1])
    first = f.pick(["a", "key", 1])
    for other in range(50):
        assert f.pick([other, "key", other * 2]) == first


def test_fields_routing_is_by_stable_hash_and_agrees_between_instances():
    f1, f2 = Fields(BOXES, [0]), Fields(BOXES, [0])
    for i in range(200):
        key = f"word{i}"
        assert f1.pick([key]) == f2.pick([key]) == BOXES[stable_hash(key) % 4]


def test_fields_multi_field_key():
    f = Fields(BOXES, [0, 2])
    a = f.pick(["x", 1, "y"])
    assert f.pick(["x", 999, "y"]) == a
    assert a == BOXES[stable_hash(("x", "y")) % 4]
    keys = {f.pick([f"k{i}", 0, f"j{i}"]) for i in range(100)}
    assert len(keys) > 1


def test_fields_distributes_keys_over_all_outboxes():
    f = Fields(BOXES, [0])
    counts = Counter(f.pick([f"key-{i}"]) for i in range(4000))
    assert set(counts) == set(BOXES)
    assert min(counts.values()) > 4000 / 4 * 0.8


def test_fields_int_keys_spread_evenly():
    f = Fields(BOXES, [0])
    counts = Counter(f.pick([i]) for i in range(400))
    assert counts == dict.fromkeys(BOXES, 100)


def test_fields_unhashable_key_is_routed_consistently_without_caching():
    f = Fields(BOXES, [0])
    key = ["a", "list"]
    first = f.pick([key, 1])
    assert f.pick([["a", "list"], 2]) == first
    assert first == BOXES[stable_hash(key) % 4]
    assert f.cache == {}


def test_fields_cache_is_cleared_beyond_its_limit(monkeypatch):
    monkeypatch.setattr(grouping, "_CACHE_MAX", 4)
    f = Fields(BOXES, [0])
    picks = {k: f.pick([k]) for k in "abcd"}
    assert len(f.cache) == 4
    picks["e"] = f.pick(["e"])
    assert len(f.cache) == 1  # cleared, then the new key cached
    assert list(f.cache) == ["e"]
    for k, ob in picks.items():  # routing does not change with the cache
        assert f.pick([k]) == ob
    assert len(f.cache) <= 4


def test_fields_equal_keys_route_the_same_whatever_was_seen_before():
    seen_int_first = Fields(BOXES[:3], [0])
    seen_int_first.pick([1])
    fresh = Fields(BOXES[:3], [0])
    assert seen_int_first.pick([1.0]) == fresh.pick([1.0])


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(
        st.one_of(st.text(max_size=8), st.integers(), st.binary(max_size=8)),
        min_size=1,
        max_size=40,
    ),
    n=st.integers(1, 6),
)
def test_fields_is_a_function_of_the_key(keys, n):
    boxes = [f"b{i}" for i in range(n)]
    f = Fields(boxes, [0])
    first = {}
    for k in keys + keys[::-1]:
        ob = f.pick([k, "payload"])
        assert ob in boxes
        first.setdefault((type(k), k), ob)
        assert first[(type(k), k)] == ob


# -- shuffle
def test_shuffle_is_round_robin():
    s = Shuffle(BOXES[:3])
    assert [s.pick(None) for _ in range(7)] == ["ob0", "ob1", "ob2", "ob0", "ob1", "ob2", "ob0"]


def test_shuffle_refresh_with_equal_load_stays_even():
    s = Shuffle(BOXES)
    s.refresh([0.3] * 4)
    counts = Counter(s.pick(None) for _ in range(400))
    assert counts == dict.fromkeys(BOXES, 100)


def test_shuffle_full_outbox_gets_fewer_slots_but_never_zero():
    s = Shuffle(BOXES[:2])
    s.refresh([1.0, 0.0])
    counts = Counter(s.pick(None) for _ in range(1200))
    assert 0 < counts["ob0"] < counts["ob1"]
    assert counts["ob0"] == 100  # weight 1 against 11


def test_shuffle_overflowing_outbox_still_gets_a_slot():
    s = Shuffle(BOXES[:3])
    s.refresh([3.7, 0.0, 0.0])  # load above 1.0 (overflow) clamps
    counts = Counter(s.pick(None) for _ in range(230))
    assert counts["ob0"] == 10
    assert counts["ob1"] == counts["ob2"] == 110


def test_shuffle_all_full_is_round_robin_again():
    s = Shuffle(BOXES[:3])
    s.refresh([1.0, 1.0, 1.0])
    assert [s.pick(None) for _ in range(6)] == ["ob0", "ob1", "ob2"] * 2


def test_shuffle_refresh_with_unchanged_load_buckets_keeps_the_rotation():
    """Refreshing often must not restart the rotation, or the first outbox gets more."""
    s = Shuffle(BOXES[:2])
    s.refresh([0.5, 0.5])
    assert s.pick(None) == "ob0"
    s.refresh([0.52, 0.58])  # same tenth: no rebuild
    assert s.pick(None) == "ob1"


def test_shuffle_refresh_of_a_single_outbox_is_a_no_op():
    s = Shuffle(["only"])
    s.refresh([1.0])
    assert [s.pick(None) for _ in range(3)] == ["only"] * 3


@settings(max_examples=80, deadline=None)
@given(loads=st.lists(st.floats(0.0, 2.0, allow_nan=False), min_size=2, max_size=5))
def test_shuffle_load_aware_is_monotone_and_starves_nobody(loads):
    boxes = [f"b{i}" for i in range(len(loads))]
    s = Shuffle(boxes)
    s.refresh(loads)
    counts = Counter(s.pick(None) for _ in range(11 * len(boxes) * 3))
    assert set(counts) == set(boxes)
    for i, li in enumerate(loads):
        for j, lj in enumerate(loads):
            if int(li * 10) < int(lj * 10) and int(li * 10) < 10:
                assert counts[boxes[i]] >= counts[boxes[j]]


# -- partial key
def _two_candidates(key):
    """Observe a key's two candidate outboxes (a fresh router alternates between them)."""
    p = PartialKey(BOXES, [0])
    return [p.pick([key]), p.pick([key])]


def test_partial_key_uses_exactly_two_outboxes_per_key_and_balances_them():
    for i in range(50):
        p = PartialKey(BOXES, [0])
        counts = Counter(p.pick([f"k{i}", "v"]) for _ in range(20))
        assert sorted(counts.values()) == [10, 10]  # every key has two candidates


@given(st.integers(2, 17), st.text(max_size=12) | st.integers())
def test_partial_key_candidates_always_differ_with_two_tasks_or_more(n, key):
    boxes = [object() for _ in range(n)]
    p = PartialKey(boxes, [0])
    assert p.pick([key]) is not p.pick([key])


def test_partial_key_with_two_tasks_splits_every_key_between_both():
    """With 2 tasks the old candidates (h % n, (h // 7919 + 1) % n)
    collided for about half the keys, pinning them to one task."""
    two = [object(), object()]
    for i in range(200):
        p = PartialKey(two, [0])
        counts = Counter(p.pick([f"key-{i}"]) for _ in range(100))
        assert sorted(counts.values()) == [50, 50], f"key-{i}"


def test_partial_key_splits_a_hot_key_where_fields_would_not():
    p, f = PartialKey(BOXES, [0]), Fields(BOXES, [0])
    key = next(f"hot{i}" for i in range(100) if len(set(_two_candidates(f"hot{i}"))) == 2)
    pk = Counter(p.pick([key]) for _ in range(100))
    fk = Counter(f.pick([key]) for _ in range(100))
    assert len(fk) == 1
    assert sorted(pk.values()) == [50, 50]


def test_partial_key_candidates_are_stable_between_instances():
    for i in range(30):
        assert _two_candidates(f"k{i}") == _two_candidates(f"k{i}")


def test_partial_key_picks_the_candidate_sent_less_so_far():
    key = next(f"k{i}" for i in range(100) if len(set(_two_candidates(f"k{i}"))) == 2)
    x, y = (BOXES.index(ob) for ob in _two_candidates(key))
    p = PartialKey(BOXES, [0])
    p.sent[x], p.sent[y] = 5, 0
    assert p.pick([key]) == BOXES[y]
    p.sent[x], p.sent[y] = 0, 9
    assert p.pick([key]) == BOXES[x]
    assert p.sent[x] == 1


def test_partial_key_without_fields_uses_the_whole_tuple():
    whole, both = PartialKey(BOXES, []), PartialKey(BOXES, [0, 1])
    rows = [[f"a{i % 7}", i % 3] for i in range(60)]
    assert [whole.pick(r) for r in rows] == [both.pick(r) for r in rows]
    first = PartialKey(BOXES, [0])
    assert [PartialKey(BOXES, []).pick(["a", n]) for n in range(20)] != [
        first.pick(["a", n]) for n in range(20)
    ]


# -- all, global, acker route
def test_all_returns_every_outbox():
    assert All(BOXES).pick(["x"]) == BOXES


def test_global_always_the_first_task():
    g = Global(BOXES)
    assert {g.pick([i]) for i in range(20)} == {"ob0"}


def test_acker_route_is_root_modulo_ackers():
    r = AckerRoute(BOXES[:3])
    assert [r.pick((root, 0)) for root in (0, 1, 2, 3, 2**62 + 1)] == [
        "ob0",
        "ob1",
        "ob2",
        "ob0",
        BOXES[(2**62 + 1) % 3],
    ]


# -- custom
WHERE = "'sink' on 'src' stream 'default'"


def test_custom_callable_returning_an_index():
    c = Custom(BOXES, [5, 6, 7, 8], lambda values, n: values[0] % n, WHERE)
    assert [c.pick([i]) for i in range(5)] == ["ob0", "ob1", "ob2", "ob3", "ob0"]


def test_custom_callable_gets_the_task_count():
    seen = []

    def grouping_fn(values, n):
        seen.append(n)
        return 0

    Custom(BOXES[:3], [1, 2, 3], grouping_fn, WHERE).pick(["x"])
    assert seen == [3]


def test_custom_callable_returning_several_indices():
    c = Custom(BOXES, [5, 6, 7, 8], lambda values, n: [0, 3], WHERE)
    assert c.pick(["x"]) == ["ob0", "ob3"]


def test_custom_choose_tasks_form_gets_prepare_and_maps_task_ids():
    class Evens:
        def prepare(self, target_tasks):
            self.tasks = target_tasks

        def choose_tasks(self, values):
            return [t for t in self.tasks if t % 2 == 0]

    g = Evens()
    c = Custom(BOXES, [5, 6, 7, 8], g, WHERE)
    assert g.tasks == [5, 6, 7, 8]
    assert c.pick(["x"]) == ["ob1", "ob3"]


def test_custom_grouping_in_storms_signatures_runs_as_it_is():
    """Storm's CustomStreamGrouping: prepare(context, stream, targetTasks) and
    chooseTasks(taskId, values). It crashed the run with a bare TypeError (found by a
    walk-through)."""

    class Mod:
        def prepare(self, context, stream, target_tasks):
            self.stream, self.tasks = stream, list(target_tasks)

        def choose_tasks(self, task_id, values):
            self.from_task = task_id
            return [self.tasks[values[0] % len(self.tasks)]]

    g = Mod()
    c = Custom(BOXES, [5, 6, 7, 8], g, WHERE, source_task=2, stream=("src", "default"))
    assert [c.pick([i]) for i in range(5)] == [["ob0"], ["ob1"], ["ob2"], ["ob3"], ["ob0"]]
    assert (g.stream, g.from_task) == (("src", "default"), 2)


def test_a_custom_grouping_whose_prepare_cannot_be_called_is_named():
    class Odd:
        def prepare(self, a, b):
            pass

        def choose_tasks(self, values):
            return []

    with pytest.raises(
        TopologyError,
        match=r"custom grouping of 'sink' on 'src' stream "
        r"'default': Odd.prepare failed: .*stormish calls prepare\(target_tasks\)",
    ):
        Custom(BOXES, [5, 6, 7, 8], Odd(), WHERE)


def test_a_custom_grouping_choosing_an_index_is_told_the_task_ids():
    class Index:
        def choose_tasks(self, values):
            return [0]

    c = Custom(BOXES, [5, 6, 7, 8], Index(), WHERE)
    with pytest.raises(ValueError, match=r"its target tasks are \[5, 6, 7, 8\]"):
        c.pick([1])


def test_custom_choose_tasks_without_prepare():
    class First:
        def choose_tasks(self, values):
            return [11]

    assert Custom(BOXES[:2], [11, 12], First(), WHERE).pick([1]) == ["ob0"]


@pytest.mark.parametrize("bad", [4, 99, [0, 4]])
def test_custom_bad_index_raises_naming_the_subscription(bad):
    c = Custom(BOXES, [5, 6, 7, 8], lambda values, n: bad, WHERE)
    with pytest.raises(ValueError, match="custom grouping of 'sink' on 'src' stream 'default'"):
        c.pick(["x"])


def test_custom_choose_tasks_unknown_task_raises_naming_the_subscription():
    class Wrong:
        def choose_tasks(self, values):
            return [42]

    c = Custom(BOXES, [5, 6, 7, 8], Wrong(), WHERE)
    with pytest.raises(ValueError, match=r"'sink' on 'src'.*42"):
        c.pick(["x"])


def test_custom_negative_index_is_rejected():
    c = Custom(BOXES, [5, 6, 7, 8], lambda values, n: -1, WHERE)
    with pytest.raises(ValueError, match="custom grouping"):
        c.pick(["x"])
