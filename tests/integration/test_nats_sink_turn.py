"""JetStreamSink on the engine's turn hook (Bolt.on_turn) against a real nats-server:
its task never blocks waiting for PubAcks. With the server's replies held back (a TCP
proxy between the sink and the server stops forwarding them), the sink fills
`max_in_flight` and its task is parked under backpressure, not stuck inside `execute`,
while another bolt on the same scheduler thread of the same worker goes on executing;
once the replies flow again every input is acked and stored. The sink declares no
thread of its own and asks for no ticks."""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid

import pytest

from stormish import BasicBolt, LocalCluster, Topology
from stormish.nats import JetStreamSink
from stormish.nats import loop as nats_loop
from stormish.testing import FeederSpout, poll_for

nats = pytest.importorskip("nats", reason="pip install 'stormish[nats]'")


class HoldingProxy:
    """A TCP proxy on 127.0.0.1 to `target`; while `hold()` is in force it forwards
    nothing from the server to the client (the client's bytes still go through), so
    the server stores the messages but its PubAcks wait here until `release()`."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.flowing = threading.Event()
        self.flowing.set()
        self.stopped = False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.socks: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def hold(self) -> None:
        self.flowing.clear()

    def release(self) -> None:
        self.flowing.set()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server = socket.create_connection(self.target)
            self.socks += [client, server]
            for src, dst, gated in ((client, server, False), (server, client, True)):
                th = threading.Thread(target=self._pump, args=(src, dst, gated), daemon=True)
                self.threads.append(th)
                th.start()

    def _pump(self, src: socket.socket, dst: socket.socket, gated: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                while gated and not self.flowing.wait(0.1):
                    if self.stopped:
                        return
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.stopped = True
        self.flowing.set()
        self.listener.close()
        for s in self.socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        for th in self.threads:
            th.join(5)
        assert not any(th.is_alive() for th in self.threads)


async def _add_stream(url: str, name: str) -> None:
    nc = await nats.connect(url)
    await nc.jetstream().add_stream(name=name, subjects=[name])
    await nc.close()


async def _values(url: str, stream: str) -> list[bytes]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    si = await js.stream_info(stream)
    out = [(await js.get_msg(stream, seq)).data for seq in range(1, si.state.last_seq + 1)]
    await nc.close()
    return out


class Count(BasicBolt):
    """Another bolt of the same worker: it only has to keep executing."""

    outputs: list = []

    def execute(self, tup):
        pass


THREADS: dict[str, list[str]] = {}


class WhereSink(JetStreamSink):
    """Records the thread its task prepared on and every input it executed, ticks too."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.key = conf["test.key"]
        THREADS.setdefault(self.key, []).append(threading.current_thread().name)

    def execute(self, tup):
        if tup.is_tick:
            THREADS[self.key].append("tick")
        super().execute(tup)


@pytest.mark.timeout(90)
def test_the_sink_is_held_not_stuck_and_another_bolt_goes_on(nats):
    out = f"OUT{uuid.uuid4().hex[:8]}"
    asyncio.run(_add_stream(nats.address, out))
    host, port = nats.address.removeprefix("nats://").split(":")
    proxy = HoldingProxy((host, int(port)))
    key = uuid.uuid4().hex
    try:
        with (
            FeederSpout(["value"]) as to_sink,
            FeederSpout(["value"]) as to_count,
            LocalCluster() as cluster,
        ):
            t = Topology("js_sink_turn", config={"test.key": key})
            t.set_spout("feed", to_sink)
            t.set_spout("other", to_count)
            sink = WhereSink(proxy.url, subject=out, max_in_flight=4, publish_timeout_secs=60)
            t.set_bolt("out", sink).shuffle_grouping("feed")
            t.set_bolt("count", Count()).shuffle_grouping("other")
            cluster.submit(t)
            to_sink.feed(["first"], msg_id="first")  # connected and acking
            poll_for(lambda: to_sink.is_acked("first"), 30, 0.02, "the first PubAck")

            proxy.hold()
            for i in range(50):
                to_sink.feed([f"v{i}"], msg_id=i)

            def held() -> bool:
                s = cluster.statistics("js_sink_turn").components["out"]
                return s.backpressure_seconds > 0.3

            poll_for(held, 30, 0.02, "the sink's task parked under backpressure")
            for i in range(200):  # the other bolt shares the sink's scheduler thread
                to_count.feed([i], msg_id=("c", i))
            poll_for(
                lambda: all(to_count.is_acked(("c", i)) for i in range(200)),
                30, 0.02, "the other bolt executing while the sink waits for PubAcks",
            )  # fmt: skip
            stats = cluster.statistics("js_sink_turn")
            sink_stats = stats.components["out"]
            assert not any(to_sink.is_acked(i) or to_sink.is_failed(i) for i in range(50))
            assert sink_stats.stuck_seconds == 0, sink_stats  # parked, never a stuck call
            assert stats.components["count"].executed >= 200

            proxy.release()
            poll_for(lambda: all(to_sink.is_acked(i) for i in range(50)), 30, 0.02, "PubAcks")
            assert not any(to_sink.is_failed(i) for i in range(50))
    finally:
        proxy.close()
    assert nats_loop.running() is None
    values = asyncio.run(_values(nats.address, out))
    assert sorted(values) == sorted([b"first"] + [f"v{i}".encode() for i in range(50)])
    # one task, on the worker's shared scheduler thread (an own thread bears its name)
    assert THREADS[key][0].startswith("worker-") and "tick" not in THREADS[key], THREADS[key]


def test_the_sink_declares_no_thread_of_its_own_and_no_ticks():
    conf = JetStreamSink("nats://127.0.0.1:1", subject="x").component_config or {}
    assert "topology.executor.own.thread" not in conf
    assert "topology.tick.tuple.freq.secs" not in conf
    assert "on_turn" in JetStreamSink.__dict__  # the engine calls it every turn instead


@pytest.mark.timeout(60)
def test_the_loop_thread_wakes_the_task_once_per_batch_of_outcomes(nats):
    """NatsPublisher calls the task's wake when outcomes come back, at most once for
    each batch the task has not yet taken (not once per PubAck), and never loses one:
    every publish's outcome is taken after a wake-up."""
    from stormish.nats.publisher import NatsPublisher

    out = f"OUT{uuid.uuid4().hex[:8]}"
    asyncio.run(_add_stream(nats.address, out))
    woken = threading.Semaphore(0)
    wakes = []

    def wake() -> None:
        wakes.append(threading.current_thread().name)
        woken.release()

    pub = NatsPublisher(JetStreamSink(nats.address, subject=out, max_in_flight=500), wake)
    try:
        for i in range(300):
            pub.publish(out, str(i).encode(), None, i)
        got, takes = [], 0
        while len(got) < 300:
            assert woken.acquire(timeout=10), f"no wake-up with {300 - len(got)} outstanding"
            done = pub.take_done()
            takes += 1
            got += done
        assert sorted(t for t, _ in got) == list(range(300)) and pub.in_flight == 0
        assert all(err is None for _, err in got), got
        assert set(wakes) == {"stormish-nats-loop"}  # from the loop thread
        assert len(wakes) <= takes + 1, (len(wakes), takes)  # one per batch taken
    finally:
        pub.close(5)
    assert nats_loop.running() is None


@pytest.mark.timeout(90)
@pytest.mark.parametrize("refused", [3, 5])
def test_publishes_refused_on_the_spot_do_not_wedge_the_sink(nats, refused):
    """A payload over the server's max_payload is refused by nats-py before it is sent,
    leaving its publish_async future and pending slot taken: after max_in_flight + 1
    such refusals the sink settled nothing more (found by a bug hunt). Each fails its
    tuple, and the next publish is acked."""
    import time

    out = "OUT" + uuid.uuid4().hex[:8]
    asyncio.run(_add_stream(nats.address, out))
    big = b"x" * (2 * 1024 * 1024)  # over the server's max_payload (1 MB)
    with FeederSpout(["value"]) as feeder, LocalCluster() as cluster:
        t = Topology("js-sink-refused")
        t.set_spout("feed", feeder)
        sink = JetStreamSink(nats.address, subject=out, max_in_flight=2, publish_timeout_secs=2)
        t.set_bolt("out", sink).shuffle_grouping("feed")
        cluster.submit(t)
        for i in range(refused):
            feeder.feed([big], msg_id=f"big{i}")
        poll_for(
            lambda: all(feeder.is_failed(f"big{i}") for i in range(refused)), 20, 0.05,
            "the oversized publishes failed",
        )  # fmt: skip
        feeder.feed([b"small"], msg_id="small")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not feeder.is_acked("small"):
            time.sleep(0.05)  # polling the spout's record, bounded by the deadline
        assert feeder.is_acked("small"), f"failed: {feeder.is_failed('small')}"
