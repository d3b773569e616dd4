"""Components several integration tests share."""

from __future__ import annotations

from collections import Counter

from stormish import BasicBolt, Bolt, Spout


def sentences(vocabulary: int, stride: int, length: int, count: int) -> list[str]:
    words = [f"w{i}" for i in range(vocabulary)]
    return [
        " ".join(words[(i * stride + j) % vocabulary] for j in range(length)) for i in range(count)
    ]


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        for w in tup.values[0].split():
            self.emit([w])


class Count(Bolt):
    """Counts words and acks; `result()` is the counts (no output)."""

    def prepare(self, conf, context):
        self.counts = Counter()

    def execute(self, tup):
        self.counts[tup.values[0]] += 1
        self.ack(tup)

    def result(self):
        return dict(self.counts)


class CountingSpout(Spout):
    """Emits 0..count-1 unreliably, `per_call` a call, then finishes."""

    outputs = ["n"]

    def __init__(self, count, per_call=100):
        self.count, self.per_call = count, per_call

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n >= self.count:
            self.finish()
            return
        for _ in range(self.per_call):
            self.emit([self.n])
            self.n += 1
