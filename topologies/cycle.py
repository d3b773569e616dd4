"""Two bolts feeding each other, with a slow bolt on the cycle: the shape that deadlocks
Storm (STORM-3637) under overload.

"ping" receives items from a fast spout and from "pong"; every tuple carries a hop count
and goes round ping -> pong -> ping until it has made HOPS hops, then leaves to "sink".
"pong" is slow. The spout is far faster than the cycle, so the cycle is overloaded for
the whole run; with `topology.max.spout.pending` set the tuples the cycle holds stay
bounded. Run: stormish run topologies/cycle.py
"""

import time

from stormish import BasicBolt, Spout, Topology

HOPS = 4
ITEMS = 20_000


class Items(Spout):
    outputs = ["id", "hops"]

    def __init__(self, count: int = ITEMS):
        self.count = count

    def open(self, conf, context):
        self.next_id = 0
        self.pending = set()
        self.replay = []

    def next_tuple(self):
        for _ in range(32):
            if self.replay:
                i = self.replay.pop()
            elif self.next_id < self.count:
                i = self.next_id
                self.next_id += 1
            else:
                if not self.pending:
                    self.finish()
                return
            self.pending.add(i)
            self.emit([i, 0], msg_id=i)

    def ack(self, msg_id):
        self.pending.discard(msg_id)

    def fail(self, msg_id):
        self.replay.append(msg_id)


class Ping(BasicBolt):
    streams = {"loop": ["id", "hops"], "done": ["id", "hops"]}

    def execute(self, tup):
        i, hops = tup.values
        if hops >= HOPS:
            self.emit([i, hops], stream="done")
        else:
            self.emit([i, hops + 1], stream="loop")


class Pong(BasicBolt):
    """The slow bolt on the cycle: ~20 us of work a tuple."""

    outputs = ["id", "hops"]

    def execute(self, tup):
        end = time.perf_counter() + 20e-6
        while time.perf_counter() < end:
            pass
        self.emit(list(tup.values))


class Sink(BasicBolt):
    def prepare(self, conf, context):
        self.done = 0

    def execute(self, tup):
        self.done += 1

    def cleanup(self):
        print(f"sink: {self.done} items made it round the cycle")

    def result(self):
        return self.done


topology = Topology(
    "cycle",
    config={
        "topology.max.spout.pending": 2000,
        "topology.executor.receive.buffer.size": 1024,
        "topology.producer.batch.size": 64,
    },
)
topology.set_spout("items", Items())
ping = topology.set_bolt("ping", Ping(), parallelism=1)
ping.shuffle_grouping("items").shuffle_grouping("pong")
topology.set_bolt("pong", Pong(), parallelism=1).shuffle_grouping("ping", stream="loop")
topology.set_bolt("sink", Sink()).shuffle_grouping("ping", stream="done")
