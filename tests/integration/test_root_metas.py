"""Root metas (runtime/ack_folder.py): a reliable spout's tuples bound for a BasicBolt of
its worker carry their tree's root alone, and every way such a tuple is settled reads it
as its tree: acked, failed by an exception (the spout's `fail` names the message id),
anchored emits (the compiled one, explicit anchors, `emit_many`), `reset_timeout`. A
consumer that does not take root metas (a batch API bolt) gets them written out; across
two workers the same run counts the same."""

from __future__ import annotations

from collections import Counter

import pytest

from stormish import BasicBolt, Bolt, Topology
from stormish.testing import CaptureBolt, ListSpout, run_topology

N = 3000


class Split(BasicBolt):
    """Fails n % 7 == 3 the first time this task sees it (an exception: a replay may
    reach the other task, which fails it too); emits n anchored to its input three
    ways."""

    outputs = ["n"]

    def prepare(self, conf, context):
        self.failed: set[int] = set()
        self.metas: Counter = Counter()  # what kind of meta its inputs carried

    def execute(self, tup):
        n = tup.values[0]
        self.metas[type(tup.meta).__name__] += 1
        if n % 7 == 3 and n not in self.failed:
            self.failed.add(n)
            raise ValueError(f"injected for {n}")
        if n % 11 == 0:
            self.reset_timeout(tup)
        self.emit((n,))  # anchored to the input (the compiled emit where built)
        if n % 5 == 0:
            self.emit_many([(n,), (n,)])  # one edge for the two rows
        if n % 13 == 0:
            self.emit((n,), anchors=[tup])

    def result(self):
        return {"metas": dict(self.metas), "failed": sorted(self.failed)}


class Batched(BasicBolt):
    """The batch API: its inputs' metas are written out before it sees them."""

    def prepare(self, conf, context):
        self.metas: Counter = Counter()

    def execute_batch(self, batch):
        for t in batch:
            self.metas[type(t.meta).__name__] += 1

    def result(self):
        return dict(self.metas)


class Settled(Bolt):
    """Batch settle: its batches' metas are written out too."""

    batch_size = 100

    def prepare(self, conf, context):
        self.metas: Counter = Counter()

    def execute_batch(self, batch):
        for t in batch:
            self.metas[type(t.meta).__name__] += 1
        return None  # the whole batch acks

    def result(self):
        return dict(self.metas)


class Manual(Bolt):
    """A Bolt that acks each tuple itself (not a BasicBolt): written out."""

    def prepare(self, conf, context):
        self.metas: Counter = Counter()

    def execute(self, tup):
        self.metas[type(tup.meta).__name__] += 1
        self.ack(tup)

    def result(self):
        return dict(self.metas)


def expected_rows() -> Counter:
    want: Counter = Counter()
    for n in range(N):
        want[n] += 1 + 2 * (n % 5 == 0) + (n % 13 == 0)
    return want


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [1, 2])
def test_root_metas_settle_as_their_trees(workers):
    t = Topology("roots", config={"topology.workers": workers})
    t.set_spout("src", ListSpout([(n,) for n in range(N)], fields=["n"], per_call=64))
    t.set_bolt("split", Split(), parallelism=2).shuffle_grouping("src")
    t.set_bolt("sink", CaptureBolt(), parallelism=2).shuffle_grouping("split")
    t.set_spout("src2", ListSpout([(n,) for n in range(N)], fields=["n"], per_call=64))
    t.set_bolt("batched", Batched()).shuffle_grouping("src2")
    t.set_spout("src3", ListSpout([(n,) for n in range(N)], fields=["n"], per_call=64))
    t.set_bolt("settled", Settled()).shuffle_grouping("src3")
    t.set_spout("src4", ListSpout([(n,) for n in range(N)], fields=["n"], per_call=64))
    t.set_bolt("manual", Manual()).shuffle_grouping("src4")
    run = run_topology(t, {"topology.acker.executors": 2}, timeout=100)
    (src,) = run.results["src"]
    assert src["acked"] == {n: 1 for n in range(N)}  # each tree acked once, in the end
    raised: Counter = Counter()  # what the split tasks failed: the spout's fails
    for part in run.results["split"]:
        raised.update(part["failed"])
    assert src["failed"] == dict(raised) and set(raised) == {n for n in range(N) if n % 7 == 3}
    assert Counter(v for (v,) in run.captured["sink"]) == expected_rows()
    (src2,) = run.results["src2"]
    assert src2["acked"] == {n: 1 for n in range(N)} and src2["failed"] == {}
    split = Counter()
    for part in run.results["split"]:
        split.update(part["metas"])
    assert sum(split.values()) == N + sum(raised.values())
    if workers == 1:  # the spout's emit wrote the root alone: both tasks are local
        assert set(split) == {"int"}, split
    else:  # a shuffle across workers: one outbox remote, so written out
        assert set(split) == {"tuple"}, split
    for other in ("batched", "settled", "manual"):  # consumers that do not take them
        (got,) = run.results[other]
        assert got == {"tuple": N}, other
    for spout in ("src3", "src4"):
        (res,) = run.results[spout]
        assert res["acked"] == {n: 1 for n in range(N)} and res["failed"] == {}, spout
