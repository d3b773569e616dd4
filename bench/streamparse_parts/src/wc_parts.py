"""The benchmark's word count as a streamparse user writes it (bench/streamparse.py):
a module of its own, so that `streamparse_run wc_parts.CountBolt` can import it too."""

import random
from collections import Counter

from streamparse import Bolt, Grouping, Spout, Topology

VOCAB = [f"w{i:03d}x" for i in range(1000)]


def sentences(n):
    rnd = random.Random(42)
    return [" ".join(rnd.choice(VOCAB) for _ in range(8)) for _ in range(n)]


class SentenceSpout(Spout):
    outputs = ["sentence"]

    def initialize(self, stormconf, context):
        self.left = sentences(int(stormconf.get("bench.sentences", 1000)))

    def next_tuple(self):
        if self.left:
            self.emit([self.left.pop()])
        elif hasattr(self, "finish"):  # stormish's, in-process: the run ends
            self.finish()


class SplitBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for w in tup.values.sentence.split():
            self.emit([w])


class CountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, conf, ctx):
        self.counts = Counter()

    def process(self, tup):
        w = tup.values.word
        self.counts[w] += 1
        self.emit([w, self.counts[w]])


class WordCount(Topology):
    sentence_spout = SentenceSpout.spec()
    split_bolt = SplitBolt.spec(inputs=[sentence_spout], par=2)
    count_bolt = CountBolt.spec(inputs={split_bolt: Grouping.fields("word")}, par=2)
