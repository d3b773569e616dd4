"""Stateful bolts in running topologies (embedded SQLite state): the example topology
topologies/stateful_wordcount.py on one in-process worker and on 2 worker processes,
counts checked against the truth, and the checkpoints seen committed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stormish import LocalCluster

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "topologies"))
import stateful_wordcount as wc  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def merged(parts):
    got: dict[str, int] = {}
    for part in parts:
        for w, n in part.items():
            got[w] = got.get(w, 0) + n
    return got


@pytest.mark.parametrize("workers", [1, 2])
def test_stateful_wordcount_counts_every_word_once(workers):
    with LocalCluster(workers=workers) as c:
        c.submit(wc.topology)
        stats = c.wait_complete(wc.topology.name, timeout=40)
        parts = c._get(wc.topology.name).results()["count"]
    assert merged(parts) == wc.expected_counts(wc.Sentences().repeat)
    assert stats.components["sentences"].failed == 0
    # the checkpoint spout's trees: INITSTATE, then PREPARE and COMMIT pairs, all acked
    assert stats.components["__checkpoint"].acked >= 3
