"""Large payloads between two workers on one host: numpy arrays (1 MiB, 64 KiB) from a
spout in worker 0 to a bolt in worker 1, through shared memory (`topology.transport.shm:
on`) and through ZeroMQ (`off`, the cross-host path: the arrays sealed with AES-GCM on
the bulk socket beside the CURVE link, transport/bulk.py; `curve`: inside the CURVE link,
`topology.transport.bulk: off`), beside ezmsg's own
benchmark run in the same window (`ezmsg perf hotpath --transports shm tcp`), rounds
interleaved so that a noisy neighbour hits every row alike.

ezmsg's figure is a round trip (publish one message, wait for it, publish the next; the
publisher and subscriber in one process, the transport forced); ours is a stream (the
spout emits as fast as the link takes it, the bolt in another process). Both are
messages a second from one sender to one receiver on this machine.

`--ceiling` adds what one ZeroMQ PUSH/PULL pair moves in this process, the link's
messages (`frames.encode_tuples`: 16 MiB of arrays, a frame per array, copy=False) with
its socket options, once CURVE-encrypted (as every link of a local run and every link
between hosts) and once in the clear (as ezmsg's TCP): the ceiling of the ZeroMQ rows.

Run: python bench/payloads.py [--rounds 3] [--count N] [--ezmsg /tmp/ezvenv/bin/ezmsg]
     [--sizes 1048576,65536] [--ceiling]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from stormish import BasicBolt, LocalCluster, Spout, Topology


class ArraySpout(Spout):
    """Emits `n` arrays of `size` bytes (a few distinct ones, never changed), `per_call`
    a call."""

    outputs = ["frame"]

    def __init__(self, n: int, size: int, per_call: int = 8):
        self.n, self.size, self.per_call = n, size, per_call

    def open(self, conf, context):
        self.left = self.n
        self.frames = [np.full(self.size // 8, i, dtype=np.float64) for i in range(4)]

    def next_tuple(self):
        k = min(self.per_call, self.left)
        if k <= 0:
            self.finish()
            return
        self.left -= k
        frames, emit = self.frames, self.emit
        for i in range(k):
            emit((frames[i & 3],))


class SizeBolt(BasicBolt):
    """Reads one element of every array (so that a mapping is touched), counts bytes."""

    def prepare(self, conf, context):
        self.bytes = 0

    def execute(self, tup):
        a = tup[0]
        self.bytes += a.nbytes + int(a[0]) * 0

    def result(self):
        return self.bytes


def stormish_rate(n: int, size: int, mode: str) -> tuple[float, float]:
    """Arrays a second, and the workers' CPU (user + system) an array in us. `mode`: a
    `topology.transport.shm` value, or `curve` (shm off, `topology.transport.bulk` off:
    the buffers inside the CURVE link, as before the sealed bulk socket)."""
    t = Topology("payloads")
    t.set_spout("spout", ArraySpout(n, size))  # task 1 -> worker 0
    t.set_bolt("sink", SizeBolt()).shuffle_grouping("spout")  # task 2 -> worker 1
    shm, bulk = ("off", "off") if mode == "curve" else (mode, "auto")
    conf = {
        "topology.acker.executors": 0,
        "topology.transport.shm": shm,
        "topology.transport.bulk": bulk,
    }
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with LocalCluster(workers=2, config=conf) as c:
        c.submit(t)
        t0 = time.perf_counter()
        stats = c.wait_complete("payloads", timeout=600)
        secs = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    executed = stats.components["sink"].executed
    dropped = {k: v.get("dropped") for k, v in stats.links.items()}
    assert executed == n, f"{executed} of {n} arrays arrived; dropped: {dropped}"
    assert stats.tasks[2].worker != stats.tasks[1].worker
    return n / secs, cpu / n * 1e6


def pair_rate(size: int, curve: bool, messages: int = 40) -> float:
    """Arrays a second through one PUSH/PULL pair on loopback (see the module doc)."""
    import threading

    import zmq

    from stormish.transport import frames as fr
    from stormish.transport.link import HWM_MESSAGES, MESSAGE_BYTES, SOCKET_BUFFER_BYTES

    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.setsockopt(zmq.RCVHWM, HWM_MESSAGES)
    pull.setsockopt(zmq.RCVBUF, SOCKET_BUFFER_BYTES)
    push.setsockopt(zmq.SNDHWM, HWM_MESSAGES)
    push.setsockopt(zmq.SNDBUF, SOCKET_BUFFER_BYTES)
    if curve:
        server_public, server_secret = zmq.curve_keypair()
        pull.curve_secretkey, pull.curve_publickey = server_secret, server_public
        pull.curve_server = True
        push.curve_publickey, push.curve_secretkey = zmq.curve_keypair()
        push.curve_serverkey = server_public
    push.connect(f"tcp://127.0.0.1:{pull.bind_to_random_port('tcp://127.0.0.1')}")
    per = max(1, MESSAGE_BYTES // size)
    arrays = [np.full(size // 8, i, dtype=np.float64) for i in range(4)]
    batch = [(2, 1, "default", [(arrays[i & 3],) for i in range(per)], None)]

    def receive() -> None:
        for _ in range(messages):
            fr.decode([p.buffer for p in pull.recv_multipart(copy=False)])

    t = threading.Thread(target=receive)
    t0 = time.perf_counter()
    t.start()
    for i in range(messages):
        push.send_multipart(fr.encode_tuples(0, i, batch), copy=False)
    t.join()
    secs = time.perf_counter() - t0
    push.close(0)
    pull.close(0)
    ctx.term()
    return messages * per / secs


def ezmsg_rates(ezmsg: str, sizes: list[int], count: int) -> dict[tuple[str, int], float]:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "ez.json")
        subprocess.run(
            [ezmsg, "perf", "hotpath", "--transports", "shm", "tcp", "--payload-sizes",
             *map(str, sizes), "--count", str(count), "--warmup", str(max(1, count // 10)),
             "--samples", "1", "--quiet", "--json-out", out],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900,
        )  # fmt: skip
        with open(out) as f:
            doc = json.load(f)
    rates = {}
    for r in doc["results"]:
        case = r["case"]
        rates[(case["transport"], case["payload_size"])] = r["summary"][
            "messages_per_second_median"
        ]
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=0, help="messages a run (default by size)")
    ap.add_argument("--sizes", default="1048576,65536")
    ap.add_argument("--ezmsg", default="/tmp/ezvenv/bin/ezmsg", help="'' to leave ezmsg out")
    ap.add_argument(
        "--modes", default="on,off,curve", help="topology.transport.shm values, and curve"
    )
    ap.add_argument("--ceiling", action="store_true", help="adds one ZeroMQ pair, CURVE/clear")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = args.modes.split(",")
    have_ez = bool(args.ezmsg) and os.path.exists(args.ezmsg)
    rows: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    print(f"payloads: {os.cpu_count()} cores, {args.rounds} interleaved rounds")
    for _ in range(args.rounds):
        for size in sizes:
            n = args.count or (60_000 if size <= 65536 else 12_000)
            for mode in modes:
                name = "bulk=off" if mode == "curve" else f"shm={mode:<4}"
                key = f"stormish {name} {size:>8} B"
                rate, us = stormish_rate(n, size, mode)
                rows.setdefault(key, []).append(rate)
                cpu.setdefault(key, []).append(us)
            if args.ceiling:
                for curve in (True, False):
                    key = f"zmq pair {'curve' if curve else 'clear':<8} {size:>8} B"
                    rows.setdefault(key, []).append(pair_rate(size, curve))
        if have_ez:
            ez = ezmsg_rates(args.ezmsg, sizes, 2000)
            for (transport, size), r in sorted(ez.items()):
                rows.setdefault(f"ezmsg {transport:<9} {size:>8} B", []).append(r)
    for key, rates in rows.items():
        med = statistics.median(rates)
        spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
        line = f"{key}: median {med:>9,.0f} msg/s  ({spread})  {med * _size(key) / 1e9:5.2f} GB/s"
        if key in cpu:
            line += f"  workers' cpu {statistics.median(cpu[key]):6.0f} us/msg"
        print(line)
    print(" ", os.popen("uptime").read().strip())


def _size(key: str) -> int:
    return int(key.split()[-2])


if __name__ == "__main__":
    sys.exit(main())
