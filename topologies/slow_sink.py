"""A fast spout and a slow bolt: backpressure you can watch.

The spout can emit millions of tuples a second; the sink takes ~50 us a tuple. The
sink's receive queue fills (it never passes its capacity), the spout's emits park in its
pendingEmitQ and the spout stops calling next_tuple until the sink catches up: watch
"backpressure: source" in the status line of `stormish run topologies/slow_sink.py`.
"""

import time

from stormish import BasicBolt, Spout, Topology


class Fast(Spout):
    outputs = ["n"]

    def __init__(self, count: int = 100_000):
        self.count = count

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n >= self.count:
            self.finish()
            return
        for _ in range(100):
            self.emit([self.n])
            self.n += 1


class Slow(BasicBolt):
    def prepare(self, conf, context):
        self.seen = 0

    def execute(self, tup):
        end = time.perf_counter() + 50e-6
        while time.perf_counter() < end:
            pass
        self.seen += 1

    def result(self):
        return self.seen


topology = Topology(
    "slow_sink",
    config={
        "topology.executor.receive.buffer.size": 4096,
        "topology.producer.batch.size": 256,
        "topology.acker.executors": 0,
    },
)
topology.set_spout("source", Fast())
topology.set_bolt("sink", Slow()).shuffle_grouping("source")
