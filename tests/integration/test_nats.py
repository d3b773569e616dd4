"""JetStreamSpout and JetStreamSink against a real nats-server with JetStream.

Each test makes streams of its own on the session's server, runs a topology in a
LocalCluster (one in-process worker, so bolts here can record what they saw) and reads
the consumer's state back from the server: the exact sum check, redelivery after
ack_wait, max_deliver to the dead-letter stream, the nak delay, the max_ack_pending
bound, in_progress from reset_timeout, and the sink's acking on the PubAck."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from stormish import BasicBolt, Bolt, LocalCluster, Topology
from stormish.nats import JetStreamSink, JetStreamSpout
from stormish.nats import loop as nats_loop
from stormish.testing import FeederSpout, ListSpout, poll_for

nats = pytest.importorskip("nats", reason="pip install 'stormish[nats]'")


def _run(coro):
    return asyncio.run(coro)


async def _make(url: str, stream: str, subjects: list[str], n: int = 0, prefix: str = "") -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name=stream, subjects=subjects)
    for i in range(n):
        await js.publish_async(f"{prefix}.{i % 4}", str(i).encode())
    await js.publish_async_completed()
    await nc.close()


async def _info(url: str, stream: str, durable: str | None = None) -> tuple:
    nc = await nats.connect(url)
    js = nc.jetstream()
    si = await js.stream_info(stream)
    ci = await js.consumer_info(stream, durable) if durable else None
    await nc.close()
    return si, ci


async def _values(url: str, stream: str) -> list[bytes]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    si = await js.stream_info(stream)
    out = [(await js.get_msg(stream, seq)).data for seq in range(1, si.state.last_seq + 1)]
    await nc.close()
    return out


def _names() -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"IN{tag}", f"in{tag}", f"OUT{tag}"


class Double(BasicBolt):
    outputs = ["value"]

    def execute(self, tup):
        self.emit([str(2 * int(tup["value"]))])


def _run_topology(t: Topology, timeout: float = 60, **conf) -> None:
    with LocalCluster(config=conf) as cluster:
        cluster.submit(t)
        cluster.wait_complete(t.name, timeout=timeout)
    assert nats_loop.running() is None  # the last NATS component stopped the loop thread


def _assert_consumed(url: str, stream: str, durable: str, n: int):
    si, ci = _run(_info(url, stream, durable))
    assert si.state.last_seq == n
    assert ci.num_ack_pending == 0 and ci.num_pending == 0
    assert ci.delivered.stream_seq == n and ci.ack_floor.stream_seq == n
    return ci


LOOPS: list = []


class LoopSpout(JetStreamSpout):
    def open(self, conf, context):
        super().open(conf, context)
        LOOPS.append((self.source.loop, threading.get_ident()))


class LoopSink(JetStreamSink):
    def prepare(self, conf, context):
        super().prepare(conf, context)
        LOOPS.append((self.out.loop, threading.get_ident()))


def test_every_message_is_processed_acked_and_published_exact_sum(nats):
    n = 3000
    stream, subj, out = _names()
    _run(_make(nats.address, stream, [f"{subj}.>"], n, subj))
    _run(_make(nats.address, out, [out]))
    t = Topology("js_sum")
    t.set_spout("in", LoopSpout(nats.address, stream, f"{subj}.>", "d", stop_at_end=True))
    t.set_bolt("double", Double(), parallelism=2).shuffle_grouping("in")
    t.set_bolt("out", LoopSink(nats.address, subject=out), parallelism=2).shuffle_grouping("double")
    _run_topology(t)
    # one loop thread for the spout and both sink tasks, never a thread of the executors
    assert len({loop for loop, _ in LOOPS}) == 1 and len(LOOPS) == 3
    assert all(loop.thread.ident != caller for loop, caller in LOOPS)
    _assert_consumed(nats.address, stream, "d", n)
    got = [int(v) for v in _run(_values(nats.address, out))]
    assert len(got) == n and sum(got) == 2 * sum(range(n))


SEEN: dict[str, list] = defaultdict(list)


class DropFirst(Bolt):
    """Never acks the first delivery of every tenth message (ack_wait must bring it back)."""

    outputs = ["value"]

    def prepare(self, conf, context):
        self.key = conf["test.key"]

    def execute(self, tup):
        seq = tup["sequence"]
        SEEN[self.key].append((seq, time.monotonic()))
        if seq % 10 == 0 and sum(s == seq for s, _ in SEEN[self.key]) == 1:
            return
        self.ack(tup)


def test_a_message_never_acked_is_redelivered_after_ack_wait(nats):
    n = 100
    stream, subj, _ = _names()
    _run(_make(nats.address, stream, [f"{subj}.>"], n, subj))
    spout = JetStreamSpout(
        nats.address, stream, f"{subj}.>", "d", ack_wait_secs=1, stop_at_end=True
    )
    t = Topology("js_ack_wait", config={"test.key": stream, "topology.message.timeout.secs": 3})
    t.set_spout("in", spout)
    t.set_bolt("b", DropFirst()).shuffle_grouping("in")
    _run_topology(t)
    ci = _assert_consumed(nats.address, stream, "d", n)
    seen = SEEN[stream]
    assert sorted({s for s, _ in seen}) == list(range(1, n + 1))
    for seq in range(10, n + 1, 10):
        times = [at for s, at in seen if s == seq]
        assert len(times) == 2 and times[1] - times[0] >= 0.9
    assert ci.num_redelivered == 0 and ci.delivered.consumer_seq == n + 10


class FailSome(BasicBolt):
    outputs = ["value"]

    def prepare(self, conf, context):
        self.key = conf["test.key"]

    def execute(self, tup):
        seq = tup["sequence"]
        SEEN[self.key].append((seq, time.monotonic()))
        if seq % 25 == 0:
            raise ValueError(f"poison {seq}")


class Letters(Bolt):
    def prepare(self, conf, context):
        self.key = conf["test.key"] + ".dead"

    def execute(self, tup):
        SEEN[self.key].append((tup["msg_id"], tup["failures"], tup["error"]))
        self.ack(tup)


def test_max_deliver_sends_the_last_failure_to_the_dead_letter_stream_and_terms(nats):
    n = 100
    stream, subj, _ = _names()
    _run(_make(nats.address, stream, [f"{subj}.>"], n, subj))
    spout = JetStreamSpout(
        nats.address, stream, f"{subj}.>", "d", max_deliver=3, nak_delay_secs=0, stop_at_end=True
    )
    t = Topology("js_dead", config={"test.key": stream})
    t.set_spout("in", spout)
    t.set_bolt("b", FailSome()).shuffle_grouping("in")
    t.set_bolt("dead", Letters()).dead_letter_grouping("in")
    _run_topology(t)
    _assert_consumed(nats.address, stream, "d", n)
    dead = sorted(SEEN[stream + ".dead"])
    assert [(m, f) for m, f, _ in dead] == [(s, 3) for s in (25, 50, 75, 100)]
    assert all("poison" in e for _, _, e in dead)
    tries = [s for s, _ in SEEN[stream]]
    assert all(tries.count(s) == (3 if s % 25 == 0 else 1) for s in range(1, n + 1))


def test_a_failed_tree_is_redelivered_after_the_nak_delay(nats):
    n = 30
    stream, subj, _ = _names()
    _run(_make(nats.address, stream, [f"{subj}.>"], n, subj))
    spout = JetStreamSpout(
        nats.address, stream, f"{subj}.>", "d", max_deliver=2, nak_delay_secs=1.0, stop_at_end=True
    )
    t = Topology("js_nak", config={"test.key": stream})
    t.set_spout("in", spout)
    t.set_bolt("b", FailSome()).shuffle_grouping("in")
    _run_topology(t)
    times = [at for s, at in SEEN[stream] if s == 25]
    assert len(times) == 2 and 0.95 <= times[1] - times[0] < 5
    _, ci = _run(_info(nats.address, stream, "d"))
    assert ci.num_ack_pending == 0 and ci.ack_floor.stream_seq == n


HOLD: dict[str, threading.Event] = {}


class Hold(Bolt):
    """Keeps every tuple un-acked until the test releases it (on a tick)."""

    outputs = ["value"]
    component_config = {"topology.tick.tuple.freq.secs": 0.05}

    def prepare(self, conf, context):
        self.key = conf["test.key"]
        self.held: list = []

    def execute(self, tup):
        if not tup.is_tick:
            self.held.append(tup)
            SEEN[self.key].append(len(self.held))
        elif HOLD[self.key].is_set():
            for held in self.held:
                self.ack(held)
            self.held = []


def test_the_spout_never_holds_more_than_max_ack_pending(nats):
    n, bound = 400, 64  # a whole number of batches of 16
    stream, subj, _ = _names()
    _run(_make(nats.address, stream, [f"{subj}.>"], n, subj))
    HOLD[stream] = threading.Event()
    spout = JetStreamSpout(
        nats.address, stream, f"{subj}.>", "d", max_ack_pending=bound, batch=16, stop_at_end=True
    )
    t = Topology("js_bound", config={"test.key": stream})
    t.set_spout("in", spout)
    t.set_bolt("b", Hold()).shuffle_grouping("in")
    with LocalCluster() as cluster:
        cluster.submit(t)
        poll_for(lambda: len(SEEN[stream]) >= bound, 20, 0.02, "the bound reached")
        _, ci = _run(_info(nats.address, stream, "d"))
        assert ci.num_ack_pending == bound and ci.num_pending == n - bound
        assert max(SEEN[stream]) == bound  # it stopped fetching there
        HOLD[stream].set()
        cluster.wait_complete("js_bound", timeout=60)
    assert max(SEEN[stream]) <= bound
    _assert_consumed(nats.address, stream, "d", n)


class SlowWithResets(Bolt):
    """Works on each tuple for `work` s (more than ack_wait) and says so every 0.2 s;
    what it acked goes to SEEN[key + ".acked"]."""

    outputs = ["value"]
    component_config = {"topology.tick.tuple.freq.secs": 0.2}
    work = 2.5

    def prepare(self, conf, context):
        self.key = conf["test.key"]
        self.held: list = []

    def execute(self, tup):
        now = time.monotonic()
        if not tup.is_tick:
            SEEN[self.key].append(tup["sequence"])
            self.held.append((now + self.work, tup))
            return
        for _, held in self.held:
            self.reset_timeout(held)
        for _, held in [h for h in self.held if h[0] <= now]:
            self.ack(held)
            SEEN[self.key + ".acked"].append(held["sequence"])
        self.held = [h for h in self.held if h[0] > now]


def test_reset_timeout_keeps_a_long_message_from_redelivery_by_in_progress(nats):
    n = 20
    stream, subj, _ = _names()
    _run(_make(nats.address, stream, [f"{subj}.>"], n, subj))
    spout = JetStreamSpout(
        nats.address, stream, f"{subj}.>", "d", ack_wait_secs=1, stop_at_end=True
    )
    t = Topology("js_wpi", config={"test.key": stream, "topology.message.timeout.secs": 2})
    t.set_spout("in", spout)
    t.set_bolt("b", SlowWithResets()).shuffle_grouping("in")
    _run_topology(t)
    ci = _assert_consumed(nats.address, stream, "d", n)
    assert sorted(SEEN[stream]) == list(range(1, n + 1))  # each delivered once
    assert ci.num_redelivered == 0 and ci.delivered.consumer_seq == n


def test_the_sink_acks_on_the_puback_and_fails_with_the_reason(nats):
    _, _, out = _names()
    _run(_make(nats.address, out, [out]))
    with FeederSpout(["subject", "value"]) as feeder, LocalCluster() as cluster:
        t = Topology("js_sink")
        t.set_spout("feed", feeder)
        sink = JetStreamSink(nats.address, subject_field="subject", publish_timeout_secs=2)
        t.set_bolt("out", sink).shuffle_grouping("feed")
        cluster.submit(t)
        for i in range(200):
            feeder.feed([out, f"v{i}"], msg_id=i)
        feeder.feed(["no.stream.here", "lost"], msg_id="nowhere")
        poll_for(lambda: all(feeder.is_acked(i) for i in range(200)), 30, 0.02, "PubAcks")
        poll_for(lambda: feeder.is_failed("nowhere"), 30, 0.02, "a failed publish")
        values = _run(_values(nats.address, out))
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(200))


def test_the_orders_example_runs_with_one_command_and_checks_its_balances(nats, tmp_path):
    example = Path(__file__).resolve().parents[2] / "topologies" / "nats_orders.py"
    env = {**os.environ, "NATS_URL": nats.address, "NATS_ORDERS": "3000"}
    r = subprocess.run(
        [sys.executable, str(example)], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=100,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "seeded stream ORDERS" in r.stdout
    assert "50 customers, balances all correct" in r.stdout
    assert "out of order" not in r.stdout


class BoundSink(JetStreamSink):
    """Records how many publishes were in flight after each input it took."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.key = conf["test.key"]

    def execute(self, tup):
        super().execute(tup)
        if not tup.is_tick:
            SEEN[self.key].append(self.out.in_flight)


def test_the_sink_never_has_more_than_max_in_flight_publishes(nats):
    n = 2000
    _, _, out = _names()
    _run(_make(nats.address, out, [out]))
    t = Topology("js_sink_bound", config={"test.key": out})
    t.set_spout("in", ListSpout([[str(i)] for i in range(n)], per_call=64))
    t.set_bolt("out", BoundSink(nats.address, subject=out, max_in_flight=8)).shuffle_grouping("in")
    _run_topology(t)
    assert len(SEEN[out]) == n and max(SEEN[out]) == 8  # it filled the bound, never more
    values = _run(_values(nats.address, out))
    assert sorted(int(v) for v in values) == list(range(n))


def test_a_missing_stream_is_an_error_naming_it(nats):
    t = Topology("js_missing")
    t.set_spout("in", JetStreamSpout(nats.address, "NO_SUCH_STREAM", "x.>", "d"))
    t.set_bolt("b", Double()).shuffle_grouping("in")
    with LocalCluster() as cluster, pytest.raises(Exception, match="NO_SUCH_STREAM") as e:
        cluster.submit(t)
        cluster.wait_complete("js_missing", timeout=30)
    assert "no stream" in str(e.value)


class Headers(BasicBolt):
    def prepare(self, conf, context):
        self.key = conf["test.key"]

    def execute(self, tup):
        SEEN[self.key].append((tup["value"], tup["headers"]))


def test_headers_go_out_through_the_sink_and_come_back_through_the_spout(nats):
    _, _, out = _names()
    _run(_make(nats.address, out, [f"{out}.>"]))
    with FeederSpout(["subject", "value", "headers"]) as feeder, LocalCluster() as cluster:
        t = Topology("js_headers_out")
        t.set_spout("feed", feeder)
        sink = JetStreamSink(nats.address, subject_field="subject", headers_field="headers")
        t.set_bolt("out", sink).shuffle_grouping("feed")
        cluster.submit(t)
        for i in range(15):  # 5 repeats of a Nats-Msg-Id: JetStream's duplicate window
            headers = {"Nats-Msg-Id": f"m{i % 10}", "k": f"h{i % 10}"}
            feeder.feed([f"{out}.x", f"v{i % 10}".encode(), headers], msg_id=i)
        poll_for(lambda: all(feeder.is_acked(i) for i in range(15)), 30, 0.02, "PubAcks")
    t = Topology("js_headers_in", config={"test.key": out})
    t.set_spout("in", JetStreamSpout(nats.address, out, f"{out}.>", "d", stop_at_end=True))
    t.set_bolt("b", Headers()).shuffle_grouping("in")
    _run_topology(t)
    got = sorted((v, h["k"]) for v, h in SEEN[out])
    assert got == sorted((f"v{i}".encode(), f"h{i}") for i in range(10))
