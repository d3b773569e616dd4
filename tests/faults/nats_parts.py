"""The JetStream fault run's parts (worker processes import this module by name) and
the admin calls the test makes with nats-py from its own process."""

from __future__ import annotations

import asyncio
import time

from stormish import BasicBolt, Topology
from stormish.nats import JetStreamSink, JetStreamSpout


class Relay(BasicBolt):
    """Passes the value on, with a little work so the run lasts a few seconds."""

    outputs = ["value"]

    def __init__(self, work: float):
        self.work = work

    def execute(self, tup):
        if self.work:
            time.sleep(self.work)  # simulated work per message, not synchronisation
        self.emit([tup["value"]])


def pipeline(name: str, url: str, stream: str, subject: str, out: str, work: float) -> Topology:
    """JetStream in -> relay (2 tasks) -> JetStream out, over two workers."""
    t = Topology(
        name,
        config={
            "topology.workers": 2,
            "topology.message.timeout.secs": 5,
            "topology.max.spout.pending": 2000,
        },
    )
    spout = JetStreamSpout(url, stream, subject, "kill", ack_wait_secs=5, stop_at_end=True)
    t.set_spout("src", spout)
    t.set_bolt("relay", Relay(work), parallelism=2).shuffle_grouping("src")
    t.set_bolt("sink", JetStreamSink(url, subject=out), parallelism=2).shuffle_grouping("relay")
    return t


async def _fill(url: str, stream: str, subject: str, out: str, n: int) -> None:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=10_000)
    await js.add_stream(name=stream, subjects=[f"{subject}.>"])
    await js.add_stream(name=out, subjects=[out])
    for i in range(n):
        await js.publish_async(f"{subject}.{i % 4}", str(i).encode())
    await js.publish_async_completed()
    await nc.close()


async def _state(url: str, stream: str, durable: str | None = None) -> tuple:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    si = await js.stream_info(stream)
    ci = await js.consumer_info(stream, durable) if durable else None
    await nc.close()
    return si, ci


async def _read(url: str, stream: str) -> list[bytes]:
    """Every message of `stream`, through an ephemeral pull consumer."""
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    last = (await js.stream_info(stream)).state.last_seq
    sub = await js.pull_subscribe(">", stream=stream)
    out: list[bytes] = []
    while len(out) < last:
        for m in await sub.fetch(1000, timeout=5):
            out.append(m.data)
            await m.ack()
    await nc.close()
    return out


def fill(url: str, stream: str, subject: str, out: str, n: int) -> None:
    asyncio.run(_fill(url, stream, subject, out, n))


def state(url: str, stream: str, durable: str | None = None) -> tuple:
    return asyncio.run(_state(url, stream, durable))


def read(url: str, stream: str) -> list[bytes]:
    return asyncio.run(_read(url, stream))
