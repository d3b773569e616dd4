"""Word count: sentences -> split (shuffle) -> count (fields on "word").

A finite, reliable topology: the spout emits a fixed corpus with message ids, replays
what fails, and finishes when everything is acked. Run it with
`stormish run topologies/wordcount.py`.
"""

from stormish import BasicBolt, Bolt, Spout, Topology

CORPUS = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]


class Sentences(Spout):
    outputs = ["sentence"]

    def __init__(self, repeat: int = 2000):
        self.repeat = repeat

    def open(self, conf, context):
        self.todo = [(i, CORPUS[i % len(CORPUS)]) for i in range(self.repeat * len(CORPUS))]
        self.todo.reverse()
        self.unacked = set()

    def next_tuple(self):
        if not self.todo:
            if not self.unacked:
                self.finish()
            return
        msg_id, sentence = self.todo.pop()
        self.unacked.add(msg_id)
        self.emit([sentence], msg_id=msg_id)

    def ack(self, msg_id):
        self.unacked.discard(msg_id)

    def fail(self, msg_id):
        self.unacked.discard(msg_id)
        self.todo.append((msg_id, CORPUS[msg_id % len(CORPUS)]))


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


class Count(Bolt):
    outputs = ["word", "count"]

    def prepare(self, conf, context):
        self.counts = {}

    def execute(self, tup):
        word = tup["word"]
        n = self.counts[word] = self.counts.get(word, 0) + 1
        self.emit([word, n], anchors=[tup])
        self.ack(tup)

    def cleanup(self):
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:3]
        print(f"count: {len(self.counts)} words, top {top}")


topology = Topology("wordcount")
topology.set_spout("sentences", Sentences(), parallelism=1)
topology.set_bolt("split", Split(), parallelism=2).shuffle_grouping("sentences")
topology.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
