"""streamparse components in stormish: the in-process adapter (stormish.streamparse) against
the same word count written with stormish's own API, per tuple, in interleaved rounds.

Word count: N sentences of 8 words from a 1,000-word vocabulary (seeded), spout -> split
(shuffle) -> count (fields on word), one worker process, acking as each API does it by
default (spout emits unreliable; bolts anchor to and ack their input: pystorm's
auto_anchor/auto_ack, stormish's BasicBolt). The streamparse spout ends the run with
stormish's `finish()` (the one stormish extension it uses); the time is from submit to the
topology's completion. `--multilang` adds the same streamparse topology run as multilang
subprocesses (`streamparse_run`, as Storm runs it), with fewer sentences.

Run: python bench/streamparse.py [--sentences N] [--rounds R] [--multilang]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

# this file's name is the package's: wc_parts imports the package, not this file
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


from stormish import BasicBolt, LocalCluster, Spout, Topology  # noqa: E402
from stormish.testing import poll_for  # noqa: E402

VOCAB = [f"w{i:03d}x" for i in range(1000)]
N = {"sentences": 100_000}  # set by main() before a topology is built


def sentences(n: int) -> list[str]:
    rnd = random.Random(42)
    return [" ".join(rnd.choice(VOCAB) for _ in range(8)) for _ in range(n)]


# -- stormish's own API ---------------------------------------------------------------
class NativeSentences(Spout):
    outputs = ["sentence"]

    def open(self, conf, context):
        self.left = sentences(N["sentences"])

    def next_tuple(self):
        if not self.left:
            self.finish()
            return
        self.emit([self.left.pop()])


class NativeSplit(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        for w in tup.values[0].split():
            self.emit([w])


class NativeCount(BasicBolt):
    outputs = ["word", "count"]

    def prepare(self, conf, context):
        self.counts = Counter()

    def execute(self, tup):
        w = tup.values[0]
        self.counts[w] += 1
        self.emit([w, self.counts[w]])


def native() -> Topology:
    t = Topology("native")
    t.set_spout("sentences", NativeSentences())
    t.set_bolt("split", NativeSplit(), 2).shuffle_grouping("sentences")
    t.set_bolt("count", NativeCount(), 2).fields_grouping("split", ["word"])
    return t


# -- streamparse, unchanged API: bench/streamparse_parts/src/wc_parts.py ------------------
PARTS = Path(__file__).resolve().parent / "streamparse_parts"
sys.path.insert(0, str(PARTS / "src"))


def streamparse(multilang: bool = False) -> Topology:
    from wc_parts import WordCount

    from stormish.streamparse.spec import build

    name = "multilang" if multilang else "in_process"
    t = build(WordCount, PARTS / "topologies" / f"{name}.py", multilang)
    t.config["bench.sentences"] = N["sentences"]
    return t


def timed(topology: Topology, words: int) -> float:
    """From submit to every word counted: the topology's completion, or (a multilang
    spout cannot say it is finished) the count bolt's executed count."""
    count = "count" if "count" in topology.components else "count_bolt"
    with LocalCluster(workers=1) as cluster:
        t0 = time.perf_counter()
        cluster.submit(topology)
        if topology.name == "multilang":
            done = lambda: cluster.statistics(topology.name).components[count].executed  # noqa: E731
            poll_for(lambda: done() >= words, 600, 0.02, "every word counted")
            dt = time.perf_counter() - t0
            executed = cluster.kill(topology.name).components[count].executed
        else:
            stats = cluster.wait_complete(topology.name, timeout=600)
            dt = time.perf_counter() - t0
            executed = stats.components[count].executed
    assert executed == words, (topology.name, executed, words)
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--multilang", action="store_true")
    args = ap.parse_args()
    N["sentences"] = args.sentences
    words = args.sentences * 8
    variants = {"native": native, "in-process": streamparse}
    runs: dict[str, list[float]] = {k: [] for k in variants}
    print(
        f"streamparse word count: {args.sentences:,} sentences x 8 words, 1 worker process, "
        f"{args.rounds} interleaved rounds; Python {sys.version.split()[0]}"
    )
    for _ in range(args.rounds):
        for name, make in variants.items():
            runs[name].append(timed(make(), words))
    for name, ts in runs.items():
        med = statistics.median(ts)
        print(
            f"{name:11s} median {med:6.2f} s  {words / med / 1e6:5.3f} M words/s  "
            f"{med / words * 1e6:5.2f} us/word  (min {min(ts):.2f}, max {max(ts):.2f})"
        )
    ratio = statistics.median(runs["in-process"]) / statistics.median(runs["native"])
    print(f"in-process / native per word: {ratio:.2f}x (target: within 2x)")
    if args.multilang:
        N["sentences"] = max(1, args.sentences // 20)
        small = N["sentences"] * 8
        dt = timed(streamparse(True), small)
        print(
            f"multilang   {N['sentences']:,} sentences: {dt:6.2f} s  {small / dt / 1e6:5.3f} M "
            f"words/s  {dt / small * 1e6:5.2f} us/word"
        )


if __name__ == "__main__":
    main()
