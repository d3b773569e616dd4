"""Multilang benchmark: the word count's split as a ShellBolt (a pystorm bolt in a
subprocess, JSON and msgpack framing) against the same split as a native stormish bolt.

spout (8-word sentences, acking on) -> split (parallelism --par) -> fields -> count.
Rounds are interleaved (native, json, msgpack, native, ...) so drift in the machine's
load hits every variant alike; each line is one run, the summary the median per variant.

Run: python bench/multilang.py [--sentences N] [--rounds R] [--par P]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from stormish import BasicBolt, Bolt, LocalCluster, Topology
from stormish.multilang import ShellBolt
from stormish.testing import ListSpout

sys.path.insert(0, str(Path(__file__).parent))
from core import sentences  # noqa: E402

SPLITTER = Path(__file__).parents[1] / "tests" / "integration" / "multilang" / "splitter.py"


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        for w in tup.values[0].split():
            self.emit([w])


class Count(Bolt):
    def prepare(self, conf, context):
        self.counts = {}

    def execute(self, tup):
        w = tup.values[0]
        self.counts[w] = self.counts.get(w, 0) + 1
        self.ack(tup)

    def result(self):
        return sum(self.counts.values())


def split_for(variant: str):
    if variant == "native":
        return Split()
    return ShellBolt([sys.executable, str(SPLITTER), variant], ["word"], serializer=variant)


def run(variant: str, lines: list[str], par: int) -> tuple[float, int]:
    name = f"bench-{variant}"
    t = Topology(name, config={"topology.max.spout.pending": 2000})
    t.set_spout("sentences", ListSpout([(s,) for s in lines], fields=["sentence"], per_call=64))
    t.set_bolt("split", split_for(variant), parallelism=par).shuffle_grouping("sentences")
    t.set_bolt("count", Count()).fields_grouping("split", ["word"])
    with LocalCluster() as cluster:
        t0 = time.perf_counter()
        cluster.submit(t)
        cluster.wait_complete(name, timeout=600)
        secs = time.perf_counter() - t0
        words = cluster._get(name).results()["count"][0]
    return secs, words


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--par", type=int, default=1)
    a = ap.parse_args()
    lines = sentences(a.sentences)
    expect = 8 * a.sentences
    variants = ["native", "json", "msgpack"]
    got: dict[str, list[float]] = {v: [] for v in variants}
    print(f"{a.sentences} sentences of 8 words, split parallelism {a.par}, acking on")
    for r in range(a.rounds):
        for v in variants:
            secs, words = run(v, lines, a.par)
            assert words == expect, f"{v}: counted {words} words, expected {expect}"
            got[v].append(secs)
            print(f"round {r + 1} {v:8s} {secs:6.2f} s  {a.sentences / secs:9,.0f} sentences/s")
    print("median per variant (a sentence in = 8 words out):")
    base = statistics.median(got["native"])
    for v in variants:
        m = statistics.median(got[v])
        us = m / a.sentences * 1e6
        print(
            f"  {v:8s} {a.sentences / m:9,.0f} sentences/s  {8 * a.sentences / m:10,.0f} words/s"
            f"  {us:7.1f} us/sentence  {m / base:5.1f}x native"
        )


if __name__ == "__main__":
    main()
