"""Unit tests of logic (no Spark, no engine): row keys, batch ids and the key ledger."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from stormish.spark.keys import (  # noqa: E402
    KeyLedger,
    batch_id,
    first_unique,
    row_keys,
    value_key,
)


def test_int_keys_are_themselves_and_others_are_digested():
    assert value_key(42) == 42
    assert value_key(-(2**63)) == -(2**63)
    big = value_key(2**70)
    assert big != 2**70 and -(2**63) <= big < 2**63
    assert value_key("a") == value_key("a") != value_key("b")
    assert value_key(True) != 1  # a bool is not an int key: it is digested


def test_keys_are_stable_across_processes_with_hash_randomisation():
    code = (
        "from stormish.spark.keys import row_keys;"
        "print(list(row_keys([('a', 1.5, None), ('b', (1, 2), 'x')], None)))"
    )
    outs = set()
    for seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        outs.add(
            subprocess.run(
                [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
            ).stdout
        )
    assert len(outs) == 1
    here = list(row_keys([("a", 1.5, None), ("b", (1, 2), "x")], None))
    assert outs.pop().strip() == str(here)


def test_row_keys_by_field_and_by_content():
    rows = [("x", 7), ("y", 8), ("x", 7)]
    assert list(row_keys(rows, 1)) == [7, 8, 7]
    by_content = row_keys(rows, None)
    assert by_content[0] == by_content[2] != by_content[1]


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50), st.randoms())
def test_batch_id_depends_on_the_set_only(keys, rnd):
    shuffled = list(keys) + list(keys[:3])
    rnd.shuffle(shuffled)
    a = batch_id(np.array(keys, dtype=np.int64))
    b = batch_id(np.array(shuffled, dtype=np.int64))
    assert a == b and 0 <= a < 2**63


def test_batch_id_differs_for_different_sets():
    assert batch_id(np.array([1, 2, 3])) != batch_id(np.array([1, 2, 4]))


@settings(max_examples=60)
@given(
    st.lists(st.lists(st.integers(-50, 50), max_size=30), max_size=12),
    st.lists(st.integers(-60, 60), max_size=40),
)
def test_ledger_matches_a_set(adds, probe):
    ledger, model = KeyLedger(), set()
    for a in adds:
        ledger.add(np.array(a, dtype=np.int64))
        model.update(a)
        mask = ledger.contains(np.array(probe, dtype=np.int64))
        assert list(mask) == [p in model for p in probe]
    assert len(ledger) >= len(model)


def test_first_unique_keeps_first_occurrence():
    assert list(first_unique(np.array([5, 3, 5, 3, 9]))) == [True, True, False, False, True]
    assert list(first_unique(np.array([], dtype=np.int64))) == []
