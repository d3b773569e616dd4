"""A tuple is settled once (runtime/ack_folder.py): its first ack or fail is what its
trees hear, as Storm's acker makes of the messages a bolt sends. Storm's bolt sends an
ack or fail message per call and its acker applies them in order: a fail and then an
ack of one tuple fail the tree (the ack is a stray); acking a tuple twice completes a
one-tuple tree on the first (the second is a stray). Folded per flush, the fail left
after the ack it preceded (the spout heard an ack), and the two acks' XORs cancelled (no
ack left: the tree timed out). A BasicBolt has no ack or fail by hand (Storm's has none:
it acks when execute returns); a fail by hand was followed by the engine's ack."""

from __future__ import annotations

import pytest

from stormish import BasicBolt, Bolt, LocalCluster, Topology, WorkerError
from stormish.testing import FeederSpout, poll_for, tracked_wait


class Pass(Bolt):
    outputs = ["cmd"]

    def execute(self, tup):
        self.emit([tup.values[0]], anchors=[tup])
        self.ack(tup)


class Twice(Bolt):
    """Settles each tuple twice, as its command says."""

    def execute(self, tup):
        cmd = tup.values[0]
        if cmd == "fail_ack":
            self.fail(tup)
            self.ack(tup)
        elif cmd == "ack_ack":
            self.ack(tup)
            self.ack(tup)
        elif cmd == "ack_fail":
            self.ack(tup)
            self.fail(tup)
        elif cmd == "fail_fail":
            self.fail(tup)
            self.fail(tup)
        else:
            self.ack(tup)


class TwiceInBatch(Twice):
    """The same, the tuples got as a batch: iterated, settled twice each, and then the
    whole batch acked (what is settled already stays as it was)."""

    def execute_batch(self, batch):
        for tup in batch:
            self.execute(tup)
        self.ack_batch(batch)


EXPECTED = {"fail_ack": "failed", "ack_ack": "acked", "ack_fail": "acked", "fail_fail": "failed"}


@pytest.mark.parametrize("bolt", [Twice, TwiceInBatch], ids=["execute", "execute_batch"])
@pytest.mark.parametrize(
    "hops, workers", [(1, 1), (2, 1), (2, 2)], ids=["first_hop", "second_hop", "two_workers"]
)
def test_the_first_ack_or_fail_of_a_tuple_is_what_its_tree_hears(bolt, hops, workers):
    # a timeout far beyond the wait: an outcome seen is the acker's, never a timeout's
    t = Topology("settle", config={"topology.message.timeout.secs": 120})
    with FeederSpout(["cmd"]) as feeder, LocalCluster(workers=workers) as cluster:
        t.set_spout("s", feeder)
        if hops == 2:
            t.set_bolt("p", Pass()).shuffle_grouping("s")
            t.set_bolt("w", bolt()).shuffle_grouping("p")
        else:
            t.set_bolt("w", bolt()).shuffle_grouping("s")
        cluster.submit(t)
        for cmd in EXPECTED:
            feeder.feed([cmd], msg_id=cmd)
        poll_for(
            lambda: len(feeder.acked) + len(feeder.failed) == len(EXPECTED),
            timeout=60,
            what="every tree settled",
        )
        heard = {m: "acked" for m in feeder.acked} | {m: "failed" for m in feeder.failed}
        assert heard == EXPECTED
        stats = cluster.statistics("settle")
        assert stats.components["s"].timed_out == 0


class HandAck(BasicBolt):
    def execute(self, tup):
        self.fail(tup)  # HAND


def test_a_basic_bolt_that_acks_or_fails_by_hand_is_told_how_it_settles():
    t = Topology("basic_hand")
    with FeederSpout(["cmd"]) as feeder, LocalCluster(workers=1) as cluster:
        t.set_spout("s", feeder)
        t.set_bolt("b", HandAck()).shuffle_grouping("s")
        cluster.submit(t)
        feeder.feed(["x"], msg_id="x")
        with pytest.raises(WorkerError) as caught:
            tracked_wait(cluster, "basic_hand", 1)
    text = str(caught.value)
    assert "BasicBolt 'b' called fail(): a BasicBolt's tuple is acked when execute returns" in text
    assert "raise FailedException to fail it on purpose" in text
    assert "HandAck.execute at" in text and "test_settle_once.py" in text
