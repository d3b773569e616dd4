"""JetStreamSpout against a real nats-server: what JetStream counts (deliveries) and what
the spout does about it."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from stormish import BasicBolt, Bolt, LocalCluster, Topology
from stormish.nats import JetStreamSpout
from stormish.testing import poll_for

from .test_nats import SEEN
from .test_nats import SlowWithResets as SlowWithResetsAt25

nats = pytest.importorskip("nats", reason="pip install 'stormish[nats]'")


def _run(coro):
    return asyncio.run(coro)


def _names():
    tag = uuid.uuid4().hex[:8]
    return f"IN{tag}", f"in{tag}"


async def _make(url, stream, subj, n):
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name=stream, subjects=[f"{subj}.>"])
    for i in range(n):
        await js.publish_async(f"{subj}.{i % 4}", str(i).encode())
    await js.publish_async_completed()
    await nc.close()


async def _info(url, stream, durable):
    nc = await nats.connect(url)
    js = nc.jetstream()
    ci = await js.consumer_info(stream, durable)
    await nc.close()
    return ci


class FailFive(BasicBolt):
    outputs = ["value"]

    def prepare(self, conf, context):
        self.key = conf["test.key"]

    def execute(self, tup):
        SEEN[self.key].append(tup["sequence"])
        if tup["sequence"] == 5:
            raise ValueError("poison")


class Letters(Bolt):
    def prepare(self, conf, context):
        self.key = conf["test.key"] + ".dead"

    def execute(self, tup):
        SEEN[self.key].append((tup["msg_id"], tup["failures"], "poison" in tup["error"]))
        self.ack(tup)


async def _nak_twice(url, stream, subj, durable, max_deliver):
    from nats.js.api import AckPolicy, ConsumerConfig

    nc = await nats.connect(url)
    js = nc.jetstream()
    cfg = ConsumerConfig(
        durable_name=durable,
        filter_subject=f"{subj}.>",
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=30,
        max_deliver=max_deliver,
        max_ack_pending=1000,
    )
    await js.add_consumer(stream, cfg)
    sub = await js.pull_subscribe_bind(durable, stream)
    for _ in range(2):
        msgs = await sub.fetch(10, timeout=2)
        for m in msgs:
            if m.metadata.sequence.stream == 5:
                await m.nak()
            else:
                await m.ack()
        await nc.flush()
    await nc.close()


def test_max_deliver_counts_the_deliveries_of_an_earlier_run_and_dead_letters_the_last(nats):
    """Message 5 was delivered and nak'ed twice before (another task of the durable, or
    an earlier run): its next delivery is JetStream's last (max_deliver=3), so its failure
    must be dead-lettered and termed, not nak'ed for a server that will not deliver it
    again (it was given up silently: no dead letter, the run ended past it)."""
    stream, subj = _names()
    _run(_make(nats.address, stream, subj, 10))
    _run(_nak_twice(nats.address, stream, subj, "d", 3))
    t = Topology("js_md_earlier", config={"test.key": stream})
    t.set_spout("in", JetStreamSpout(nats.address, stream, f"{subj}.>", "d", max_deliver=3,
                                      nak_delay_secs=0, stop_at_end=True))  # fmt: skip
    t.set_bolt("b", FailFive()).shuffle_grouping("in")
    t.set_bolt("dead", Letters()).dead_letter_grouping("in")
    with LocalCluster() as cluster:
        cluster.submit(t)
        cluster.wait_complete("js_md_earlier", timeout=30)
    assert SEEN[stream] == [5]
    assert SEEN[stream + ".dead"] == [(5, 3, True)]
    ci = _run(_info(nats.address, stream, "d"))
    assert ci.num_ack_pending == 0 and ci.ack_floor.stream_seq == 10  # termed: acked past


class SlowWithResets(SlowWithResetsAt25):
    """Works on each tuple for 3 s (three ack_waits) and says so every 0.2 s."""

    work = 3.0


def test_a_deactivated_spout_still_tells_jetstream_a_long_tree_is_in_progress(nats):
    """reset_timeout's +WPI, gathered while the spout was deactivated (next_tuple not
    called), went out only at the next ack: JetStream redelivered every message whose
    tree was still at work after ack_wait, and the spout emitted it again on activate."""
    n = 5
    stream, subj = _names()
    _run(_make(nats.address, stream, subj, n))
    t = Topology("js_wpi_inactive", config={"test.key": stream, "topology.message.timeout.secs": 2})
    t.set_spout("in", JetStreamSpout(nats.address, stream, f"{subj}.>", "d", ack_wait_secs=1,
                                      stop_at_end=True))  # fmt: skip
    t.set_bolt("b", SlowWithResets()).shuffle_grouping("in")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: len(SEEN[stream]) == n, 30, 0.02, "every message in a tree")
        cluster.deactivate("js_wpi_inactive")
        poll_for(lambda: len(SEEN[stream + ".acked"]) == n, 30, 0.02, "every tree done")
        cluster.activate("js_wpi_inactive")
        cluster.wait_complete("js_wpi_inactive", timeout=30)
    ci = _run(_info(nats.address, stream, "d"))
    assert sorted(SEEN[stream]) == list(range(1, n + 1))  # each delivered once
    assert ci.num_redelivered == 0 and ci.delivered.consumer_seq == n


class Seen(BasicBolt):
    outputs = ["value"]

    def prepare(self, conf, context):
        self.key = conf["test.key"]

    def execute(self, tup):
        SEEN[self.key].append(tup["sequence"])


async def _has_consumer(url, stream, durable):
    nc = await nats.connect(url)
    try:
        await nc.jetstream().consumer_info(stream, durable)
        return True
    except nats.js.errors.NotFoundError:
        return False
    finally:
        await nc.close()


async def _publish(url, subj, n):
    nc = await nats.connect(url)
    js = nc.jetstream()
    for i in range(n):
        await js.publish_async(f"{subj}.{i % 4}", str(i).encode())
    await js.publish_async_completed()
    await nc.close()


def test_a_deactivated_spout_neither_pulls_nor_lets_what_it_holds_be_redelivered(nats):
    """Messages published while the spout is deactivated: the fetch loop pulled them on,
    they waited past ack_wait unemitted, JetStream redelivered them (into the same inbox)
    every ack_wait, and on activate each was emitted once per delivery."""
    stream, subj = _names()
    _run(_make(nats.address, stream, subj, 0))
    t = Topology("js_inactive_pull", config={"test.key": stream})
    t.set_spout("in", JetStreamSpout(nats.address, stream, f"{subj}.>", "d", ack_wait_secs=1))
    t.set_bolt("b", Seen()).shuffle_grouping("in")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: _run(_has_consumer(nats.address, stream, "d")), 30, 0.05, "bound")
        cluster.deactivate("js_inactive_pull")
        _run(_publish(nats.address, subj, 5))
        start = time.monotonic()  # three ack_waits pass, watched on the server
        while time.monotonic() - start < 3.0:
            ci = _run(_info(nats.address, stream, "d"))
            assert ci.num_redelivered == 0 and ci.delivered.consumer_seq <= 5
        cluster.activate("js_inactive_pull")
        poll_for(lambda: len(SEEN[stream]) >= 5, 30, 0.02, "every message")
        poll_for(lambda: _run(_info(nats.address, stream, "d")).num_ack_pending == 0, 30, 0.05,
                 "every message acked")  # fmt: skip
    ci = _run(_info(nats.address, stream, "d"))
    assert sorted(SEEN[stream]) == [1, 2, 3, 4, 5]
    assert ci.num_redelivered == 0 and ci.delivered.consumer_seq == 5
