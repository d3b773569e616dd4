"""Components several integration tests share."""

from __future__ import annotations

from collections import Counter

from stormish import BasicBolt, Bolt


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
