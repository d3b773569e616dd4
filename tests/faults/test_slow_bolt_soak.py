"""A slow bolt behind a fast reliable spout, with every setting at its default: the
defaults must keep the topology making progress, not turn the backlog into a storm of
timed-out trees and replays. About a minute of wall time: marked `faults`."""

from __future__ import annotations

import time

import pytest

from stormish import BasicBolt, LocalCluster, Spout, Topology

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]

EMIT_SECS = 55.0  # new message ids this long; then replays only, until every id is acked
BOLT_SECS = 0.001  # the slow bolt's work per tuple


class FastReliableSpout(Spout):
    """Emits new ids as fast as the engine lets it for `emit_secs`, replays every failed
    id, and finishes when every id it emitted has been acked."""

    outputs = ["n"]

    def __init__(self, emit_secs: float):
        self.emit_secs = emit_secs

    def open(self, conf, context):
        self.stop_at = time.monotonic() + self.emit_secs
        self.next_id = 0
        self.pending: set[int] = set()
        self.replay: list[int] = []
        self.acked = self.fails = 0

    def next_tuple(self):
        for _ in range(64):
            if self.replay:
                i = self.replay.pop()
            elif time.monotonic() < self.stop_at:
                i = self.next_id
                self.next_id += 1
            else:
                if not self.pending:
                    self.finish()
                return
            self.pending.add(i)
            self.emit([i], msg_id=i)

    def ack(self, msg_id):
        self.pending.discard(msg_id)
        self.acked += 1

    def fail(self, msg_id):
        self.fails += 1
        self.replay.append(msg_id)

    def result(self):
        return {"ids": self.next_id, "acked": self.acked, "failed": self.fails}


class SlowBolt(BasicBolt):
    def execute(self, tup):
        time.sleep(BOLT_SECS)


def test_slow_bolt_under_default_settings_times_out_under_one_percent():
    topo = Topology("soak")
    topo.set_spout("fast", FastReliableSpout(EMIT_SECS))
    topo.set_bolt("slow", SlowBolt()).shuffle_grouping("fast")
    with LocalCluster() as cluster:
        cluster.submit(topo)
        running = cluster._get("soak")
        try:
            final = running.wait_complete(EMIT_SECS + 60)
        except TimeoutError:
            final = running.kill()
        spout = running.results()["fast"][0]
    fast = final.components["fast"]
    trees = fast.acked + fast.failed  # every tree ends acked or failed (timed out here)
    share = fast.timed_out / max(trees, 1)
    print(
        f"soak: {spout['ids']:,} ids, {fast.acked:,} trees acked, {fast.timed_out:,} timed "
        f"out ({share:.2%}), status {final.status}, {final.uptime_seconds:.0f} s"
    )
    assert final.status == "complete", f"not complete: {final.components}"
    assert spout["acked"] == spout["ids"] > 0
    assert share < 0.01
