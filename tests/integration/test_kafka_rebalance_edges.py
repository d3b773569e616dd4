"""KafkaSpout at the edges of a rebalance, and at_most_once's commit, against the
in-memory log (found by a bug hunt; each failed on the code before its fix):

- a failed record waiting out its retry delay is in no tree: a revoke does not wait the
  whole revoke_timeout_secs for it;
- a partition given back to the spout after a revoke that timed out keeps being read
  (its new lane was released by a later ack: every record after was dropped);
- at_most_once commits each polled batch before any of its records reaches a bolt.
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from stormish import BasicBolt, LocalCluster, Topology
from stormish.kafka import KafkaSpout, Retry
from stormish.testing import MemoryLog, poll_for
from stormish.testing.memory_log import memory_log

from .kafka_helpers import fill

pytestmark = pytest.mark.timeout(90)
_names = itertools.count()
LOCK = threading.Lock()
SEEN: dict[str, list[int]] = {}


def noted(name: str) -> list[int]:
    with LOCK:
        return list(SEEN.get(name, []))


class FailFirstOnce(BasicBolt):
    """Offset 0 fails its first time; every offset it processes is noted."""

    def __init__(self, name: str):
        self.name = name
        self.failed = False

    def execute(self, tup):
        if tup["offset"] == 0 and not self.failed:
            self.failed = True
            raise RuntimeError("offset 0 fails once")
        with LOCK:
            SEEN.setdefault(self.name, []).append(tup["offset"])


class SlowFirst(BasicBolt):
    """Offset 0 takes 3 s the first time (longer than revoke_timeout_secs=1)."""

    def __init__(self, name: str):
        self.name = name
        self.slow = True

    def execute(self, tup):
        if tup["offset"] == 0 and self.slow:
            self.slow = False
            time.sleep(3)  # the slow tree a revoke times out on
        with LOCK:
            SEEN.setdefault(self.name, []).append(tup["offset"])


def _second_member(log: MemoryLog, group: str) -> tuple[object, threading.Event, threading.Thread]:
    """Another member of the group, polling: an eager rebalance."""
    other = log.consumer(group)
    stop = threading.Event()
    other.subscribe(["in"], None, lambda tps: {}, lambda tps: None)

    def poll() -> None:
        while not stop.is_set():
            other.poll(10, 0.05)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    return other, stop, t


def _rebalanced(log: MemoryLog, group: str) -> bool:
    g = log.groups[group]
    return bool(g.assigned) and all(m.joined == g.generation for m in g.members)


def test_a_revoke_does_not_wait_for_a_record_only_waiting_for_its_replay():
    name = f"revoke-due-{next(_names)}"
    with MemoryLog(name) as log:
        fill(log, "in", 1, 20)
        t = Topology(name)
        spout = KafkaSpout(
            log.address, topics="in", group_id="g", commit_interval_secs=0.1,
            revoke_timeout_secs=4, retry=Retry(initial_delay_secs=30),
        )  # fmt: skip
        t.set_spout("k", spout)
        t.set_bolt("b", FailFirstOnce(name)).shuffle_grouping("k")
        with LocalCluster() as cluster:
            cluster.submit(t)
            poll_for(lambda: len(noted(name)) >= 19, 10, 0.01, "offsets 1..19 processed")
            other, stop, poller = _second_member(log, "g")
            t0 = time.monotonic()
            try:
                poll_for(lambda: _rebalanced(log, "g"), 20, 0.01, "the rebalance")
                took = time.monotonic() - t0
            finally:
                stop.set()
                poller.join(2)
                other.close()
    assert took < 2.0, f"the revoke waited {took:.1f}s for a record waiting for its replay"


def test_a_partition_given_back_after_a_timed_out_revoke_keeps_being_read():
    name = f"revoke-back-{next(_names)}"
    with MemoryLog(name) as log:
        fill(log, "in", 1, 5)
        t = Topology(name, config={"topology.message.timeout.secs": 30})
        spout = KafkaSpout(
            log.address, topics="in", group_id="g", commit_interval_secs=0.1,
            revoke_timeout_secs=1,
        )  # fmt: skip
        t.set_spout("k", spout)
        t.set_bolt("b", SlowFirst(name)).shuffle_grouping("k")
        with LocalCluster() as cluster:
            cluster.submit(t)
            poll_for(lambda: log.groups.get("g") is not None, 10, 0.01, "the group")
            time.sleep(0.5)  # offset 0 is in the slow bolt
            other, stop, poller = _second_member(log, "g")
            try:
                poll_for(lambda: _rebalanced(log, "g"), 20, 0.01, "the rebalance")
                assert log.groups["g"].members[0].owned == [("in", 0)]  # the spout's again
                poll_for(lambda: 0 in noted(name), 10, 0.02, "the slow tree's end")
                for i in range(5, 15):
                    log.produce("in", str(i).encode(), partition=0)
                poll_for(
                    lambda: set(noted(name)) >= set(range(15))
                    and log.committed("g", "in", 0) == 15,
                    15, 0.02, "all 15 processed and committed",
                )  # fmt: skip
            finally:
                stop.set()
                poller.join(2)
                other.close()


class CommittedWhenSeen(BasicBolt):
    """Notes, for each record, the group's committed position when it was processed."""

    def __init__(self, log_name: str, name: str):
        self.log_name, self.name = log_name, name

    def execute(self, tup):
        committed = memory_log(self.log_name).committed("g", "in", tup["partition"])
        with LOCK:
            SEEN.setdefault(self.name, []).append((tup["offset"], committed))


def test_at_most_once_commits_each_batch_before_a_bolt_sees_it():
    name = f"amo-{next(_names)}"
    with MemoryLog(name) as log:
        fill(log, "in", 1, 2000)
        t = Topology(name)
        spout = KafkaSpout(
            log.address, topics="in", group_id="g", processing_guarantee="at_most_once",
            poll_batch=50, stop_at_end=True,
        )  # fmt: skip
        t.set_spout("k", spout)
        t.set_bolt("b", CommittedWhenSeen(name, name)).shuffle_grouping("k")
        with LocalCluster() as cluster:
            cluster.submit(t)
            cluster.wait_complete(name, timeout=60)
    rows = noted(name)
    assert len(rows) == 2000
    early = [(o, c) for o, c in rows if c is None or c <= o]
    assert not early, f"{len(early)} records processed before their commit, e.g. {early[:5]}"
