"""Engine-core benchmark: one worker process, everything measured in one run.

(a) const spout -> null bolt, acking off and on;
(b) word count: 200,000 sentences of 8 words from a 1,000-word vocabulary (deterministic),
    split -> fields grouping -> count, acking off and on;
(c) the same split-and-count as a bare Python loop, and the ratio (b)/(c).

With `--rounds R` (R > 1) every configuration runs R times in interleaved rounds (one
of each per round, so a slower spell of a shared machine hits all alike) and the medians,
min and max are printed with the ratios acking on / off of the same run (per round and
of the medians): the machine's speed drifts, ratios within one run are what count.

Run: python bench/core.py [--tuples N] [--sentences N] [--rounds R] [--only const|wc]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from stormish import BasicBolt, LocalCluster, Spout, Topology

VOCAB = [f"w{i:03d}x" for i in range(1000)]


def sentences(n: int) -> list[str]:
    rnd = random.Random(42)
    return [" ".join(rnd.choice(VOCAB) for _ in range(8)) for _ in range(n)]


class ConstSpout(Spout):
    outputs = ["v"]

    def __init__(self, n: int, reliable: bool, per_call: int):
        self.n, self.reliable, self.per_call = n, reliable, per_call

    def open(self, conf, context):
        self.left = self.n
        self.seq = 0

    def next_tuple(self):
        k = min(self.per_call, self.left)
        if k <= 0:
            self.finish()
            return
        self.left -= k
        emit = self.emit
        if self.reliable:
            for _ in range(k):
                self.seq += 1
                emit((1,), msg_id=self.seq)
        else:
            for _ in range(k):
                emit((1,))


ONE = (1,)


class ConstSpout1(Spout):
    """Storm's ConstSpout shape: one emit per next_tuple call, nothing else."""

    outputs = ["v"]

    def __init__(self, n: int):
        self.n = n

    def open(self, conf, context):
        self.left = self.n

    def next_tuple(self):
        if self.left:
            self.left -= 1
            self.emit(ONE)
        else:
            self.finish()


class ReliableConstSpout1(ConstSpout1):
    """The same with a message id: one reliable emit per next_tuple call."""

    def next_tuple(self):
        left = self.left
        if left:
            self.left = left - 1
            self.emit(ONE, msg_id=left)
        else:
            self.finish()


class NullBolt(BasicBolt):
    def execute(self, tup):
        pass


class SentenceSpout(Spout):
    """Emits the sentences in chunks of 64; with several tasks, task k of n takes every
    n-th chunk."""

    outputs = ["sentence"]

    def __init__(self, data: list[str], reliable: bool):
        self.data, self.reliable = data, reliable

    def open(self, conf, context):
        self.step = 64 * len(context.component_tasks)
        self.i = 64 * context.task_index

    def next_tuple(self):
        i = self.i
        if i >= len(self.data):
            self.finish()
            return
        chunk = self.data[i : i + 64]
        self.i = i + self.step
        emit = self.emit
        if self.reliable:
            for j, s in enumerate(chunk):
                emit((s,), msg_id=i + j)
        else:
            for s in chunk:
                emit((s,))


class SplitBolt(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        emit = self.emit
        for w in tup.values[0].split():
            emit((w,))


class SplitBatchBolt(BasicBolt):
    """The same split with the batch API: one call per received batch."""

    outputs = ["word"]

    def execute_batch(self, batch):
        emit = self.emit
        for (s,) in batch.values:
            for w in s.split():
                emit((w,))


class CountBatchBolt(BasicBolt):
    def prepare(self, conf, context):
        self.counts = {}

    def execute_batch(self, batch):
        counts = self.counts
        get = counts.get
        for (w,) in batch.values:
            counts[w] = get(w, 0) + 1


class CountBolt(BasicBolt):
    def prepare(self, conf, context):
        self.counts = {}

    def execute(self, tup):
        w = tup.values[0]
        self.counts[w] = self.counts.get(w, 0) + 1


def run(topology: Topology, conf: dict) -> tuple[float, object]:
    with LocalCluster(config=conf) as c:
        t0 = time.perf_counter()
        c.submit(topology)
        stats = c.wait_complete(topology.name, timeout=600)
        return time.perf_counter() - t0, stats


def bench_const(n: int, acking: bool, per_call: int) -> float:
    t = Topology("const")
    if per_call == 1:
        spout = ReliableConstSpout1(n) if acking else ConstSpout1(n)
    else:
        spout = ConstSpout(n, acking, per_call)
    t.set_spout("spout", spout)
    t.set_bolt("null", NullBolt()).shuffle_grouping("spout")
    conf = {"topology.acker.executors": 1 if acking else 0}
    if acking:
        conf["topology.max.spout.pending"] = 20000
    secs, _ = run(t, conf)
    return n / secs


def bench_wordcount(data: list[str], acking: bool, batch_api: bool = False) -> float:
    t = Topology("wc")
    t.set_spout("sentences", SentenceSpout(data, acking))
    if batch_api and not acking:
        t.set_bolt("split", SplitBatchBolt()).shuffle_grouping("sentences")
        t.set_bolt("count", CountBatchBolt()).fields_grouping("split", ["word"])
    else:
        t.set_bolt("split", SplitBolt()).shuffle_grouping("sentences")
        t.set_bolt("count", CountBolt()).fields_grouping("split", ["word"])
    conf = {"topology.acker.executors": 1 if acking else 0}
    if acking:
        conf["topology.max.spout.pending"] = 5000
    secs, stats = run(t, conf)
    words = stats.components["count"].executed
    assert words == 8 * len(data), words
    return words / secs


def bare(data: list[str]) -> float:
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        counts: dict[str, int] = {}
        for s in data:
            for w in s.split():
                counts[w] = counts.get(w, 0) + 1
        best = max(best, 8 * len(data) / (time.perf_counter() - t0))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tuples", type=int, default=2_000_000)
    ap.add_argument("--sentences", type=int, default=200_000)
    ap.add_argument("--only", choices=["const", "wc"], default=None)
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds (see above)")
    args = ap.parse_args()
    data = sentences(args.sentences)
    print(
        f"stormish core benchmark (1 worker process, {args.tuples:,} const tuples, "
        f"{args.sentences:,} sentences x 8 words)"
    )
    if args.rounds > 1:
        interleaved(args, data)
        return
    if args.only in (None, "const"):
        for acking in (False, True):
            n = args.tuples if not acking else args.tuples // 4
            for per_call in (1, 100):
                r = bench_const(n, acking, per_call)
                print(
                    f"(a) const->null  acking {'on ' if acking else 'off'} "
                    f"{per_call:>3} emits/next_tuple: {r / 1e6:6.2f} M tuples/s"
                )
    if args.only in (None, "wc"):
        b = bare(data)
        print(f"(c) bare loop split+count:                 {b / 1e6:6.2f} M words/s")
        for acking, batch_api in ((False, False), (False, True), (True, False)):
            r = bench_wordcount(data, acking, batch_api)
            api = "execute_batch" if batch_api else "execute     "
            print(
                f"(b) wordcount     acking {'on ' if acking else 'off'} {api}:"
                f"   {r / 1e6:6.2f} M words/s  ratio to bare {r / b:.3f}"
            )


def interleaved(args: argparse.Namespace, data: list[str]) -> None:
    """Every configuration once per round; const runs the same tuple count acking on
    and off (so a run's fixed start-up cost weighs alike on both)."""
    runs: dict[str, tuple[object, int]] = {}
    if args.only in (None, "const"):
        for per_call in (1, 100):
            for acking in (False, True):
                name = f"(a) const->null acking {'on ' if acking else 'off'} {per_call:>3}/call"
                run = lambda a=acking, k=per_call: bench_const(args.tuples, a, k)  # noqa: E731
                runs[name] = (run, args.tuples)
    if args.only in (None, "wc"):
        for acking in (False, True):
            name = f"(b) wordcount   acking {'on ' if acking else 'off'} execute "
            runs[name] = (lambda a=acking: bench_wordcount(data, a), 8 * len(data))
    rates: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}  # process CPU ns per item
    for _ in range(args.rounds):
        for name, (run_one, items) in runs.items():
            c0 = time.process_time()
            rates[name].append(run_one())  # type: ignore[operator]
            cpu[name].append((time.process_time() - c0) / items * 1e9)
    print(
        f"{args.rounds} interleaved rounds; M tuples (words) / s, and the process's CPU "
        f"time per tuple (word), which a machine shared with other work disturbs less"
    )
    print(f"{'configuration':<38}{'median':>8}{'min':>8}{'max':>8}{'CPU ns':>8}")
    for name, rs in rates.items():
        print(
            f"{name:<38}{statistics.median(rs) / 1e6:>8.3f}"
            f"{min(rs) / 1e6:>8.3f}{max(rs) / 1e6:>8.3f}{statistics.median(cpu[name]):>8.0f}"
        )
    pairs = [(k, k.replace("acking off", "acking on ")) for k in rates if "acking off" in k]
    for off, on in pairs:
        per_round = [b / a for a, b in zip(rates[off], rates[on], strict=True)]
        what = off.replace("acking off ", "").strip()
        ratio = statistics.median(rates[on]) / statistics.median(rates[off])
        by_cpu = statistics.median(cpu[off]) / statistics.median(cpu[on])
        rounds = ", ".join(f"{r:.2f}" for r in per_round)
        print(f"acking on / off, {what}: {ratio:.2f} (per round {rounds}; by CPU {by_cpu:.2f})")


if __name__ == "__main__":
    main()
