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


def test_stateful_bolts_under_the_test_kit():
    """complete_topology with a mock source, and a FeederSpout on a FakeClock: the fed
    tuple is acked once simulated time passes a checkpoint interval (its ack is held
    until the commit after it)."""
    from stormish import Topology
    from stormish.testing import FakeClock, FeederSpout, advance_time, complete_topology, poll_for

    res = complete_topology(wc.topology, mock_sources={"sentences": [["the cow"], ["the moon"]]})
    assert sorted(map(tuple, res.read_tuples("count"))) == [
        ("cow", 1),
        ("moon", 1),
        ("the", 1),
        ("the", 2),
    ]
    with FeederSpout(["sentence"]) as feeder, LocalCluster(clock=FakeClock()) as c:
        t = Topology("fed", config={"topology.state.checkpoint.interval.ms": 1000})
        t.set_spout("s", feeder)
        t.set_bolt("split", wc.Split()).shuffle_grouping("s")
        t.set_bolt("count", wc.Counter()).fields_grouping("split", ["word"])
        c.submit(t)
        feeder.feed(["a b a"], msg_id=1)

        def acked() -> bool:
            advance_time(c, 0.5)
            return feeder.is_acked(1)

        poll_for(acked, 20, 0.0, "the fed sentence acked after a commit")
