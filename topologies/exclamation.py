"""Storm's ExclamationTopology: words -> exclaim -> exclaim, each bolt adding "!!!"."""

from stormish import BasicBolt, Spout, Topology

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]


class Words(Spout):
    outputs = ["word"]

    def __init__(self, count: int = 10_000):
        self.count = count

    def open(self, conf, context):
        self.i = 0

    def next_tuple(self):
        if self.i >= self.count:
            self.finish()
            return
        self.emit([WORDS[self.i % len(WORDS)]])
        self.i += 1


class Exclaim(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        self.emit([tup["word"] + "!!!"])


class Show(BasicBolt):
    def prepare(self, conf, context):
        self.seen = {}

    def execute(self, tup):
        self.seen[tup["word"]] = self.seen.get(tup["word"], 0) + 1

    def cleanup(self):
        for word, n in sorted(self.seen.items()):
            print(f"{word} x{n}")


topology = Topology("exclamation")
topology.set_spout("words", Words(), parallelism=1)
topology.set_bolt("exclaim1", Exclaim(), parallelism=2).shuffle_grouping("words")
topology.set_bolt("exclaim2", Exclaim(), parallelism=2).shuffle_grouping("exclaim1")
topology.set_bolt("show", Show(), parallelism=1).global_grouping("exclaim2")
