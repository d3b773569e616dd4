"""Multilang (stormish.multilang): real pystorm and Node components as subprocesses.

The components in tests/integration/multilang/ are written as their users write them
(pystorm's Bolt and Spout; a storm.js-style Node bolt) and are not changed for stormish.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from stormish import Bolt, LocalCluster, Topology
from stormish.multilang import ShellBolt, ShellSpout
from stormish.testing import FailOnceBolt, ListSpout, poll_for

from .parts import Count

HERE = Path(__file__).parent / "multilang"
PY = sys.executable
SENTENCES = [f"s{i} the cow jumped over the moon" for i in range(300)]


def expected_words(sentences):
    return Counter(w for s in sentences for w in s.split())


def no_children_left(pids):
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"multilang child {pid} outlived its topology")


def word_count(split, name, config=None):
    t = Topology(name, config=config or {})
    t.set_spout("sentences", ListSpout([(s,) for s in SENTENCES], fields=["sentence"]))
    t.set_bolt("split", split, parallelism=2).shuffle_grouping("sentences")
    t.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
    return t


def merged_counts(results):
    total = Counter()
    for part in results["count"]:
        total.update(part)
    return total


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
def test_a_pystorm_bolt_splits_sentences_exactly(serializer):
    split = ShellBolt([PY, str(HERE / "splitter.py"), serializer], ["word"], serializer=serializer)
    with LocalCluster() as cluster:
        cluster.submit(word_count(split, f"ml-{serializer}"))
        stats = cluster.wait_complete(f"ml-{serializer}", timeout=60)
        results = cluster._get(f"ml-{serializer}").results()
    assert merged_counts(results) == expected_words(SENTENCES)
    (spout,) = results["sentences"]
    assert sorted(spout["acked"]) == list(range(len(SENTENCES)))
    assert not spout["failed"]
    assert stats is not None


class Sink(Bolt):
    """Counts values of its input's first field and acks."""

    def prepare(self, conf, context):
        self.counts = Counter()

    def execute(self, tup):
        self.counts[tup.values[0]] += 1
        self.ack(tup)

    def result(self):
        return dict(self.counts)


def every_tenth(values):
    return int(values[0].split()[0][1:]) % 10 == 0


def spout_stat(cluster, name, field):
    return getattr(cluster.statistics(name).component("sentences"), field)


@pytest.mark.parametrize("serializer", ["json", "msgpack"])
def test_a_reliable_pystorm_spout_replays_what_fails(serializer):
    n = 200
    name = f"mlspout-{serializer}"
    t = Topology(name, config={"test.sentences": n})
    spout = ShellSpout([PY, str(HERE / "sentences.py"), serializer], ["sentence"],
                       serializer=serializer)  # fmt: skip
    t.set_spout("sentences", spout)
    # every 10th sentence fails once (the bolt raises): the spout's fail replays it
    t.set_bolt("flaky", FailOnceBolt(every_tenth, outputs=["sentence"])).shuffle_grouping(
        "sentences"
    )
    t.set_bolt("sink", Sink()).shuffle_grouping("flaky")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(
            lambda: spout_stat(cluster, name, "acked") >= n,
            timeout=60, interval=0.05, what="every sentence acked",
        )  # fmt: skip
        failed = spout_stat(cluster, name, "failed")
        cluster.kill(name)
        results = cluster._get(name).results()
    (sink,) = results["sink"]
    assert sink == {f"s{i} the cow jumped over the moon": 1 for i in range(n)}
    assert failed == n // 10
