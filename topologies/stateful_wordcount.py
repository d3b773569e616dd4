"""Word count whose counts survive a crash: sentences -> split -> count, where count is a
StatefulBolt (Storm's IStatefulBolt) keeping its counts in a KeyValueState.

The engine adds the checkpoint spout: every `topology.state.checkpoint.interval.ms` the
counts are prepared and committed (a SQLite file per task in the worker's data
directory), and each word is acked only once the checkpoint after it has committed. A
worker killed mid-run comes back with the counts of the last commit, and the spout
replays every sentence not fully acked: counts are never lower than the truth.
Run it with `stormish run -w 2 topologies/stateful_wordcount.py`.
"""

from stormish import BasicBolt, Spout, Topology
from stormish.state import StatefulBolt

CORPUS = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]


class Sentences(Spout):
    """A finite, reliable spout: replays what fails, finishes once everything is acked."""

    outputs = ["sentence"]

    def __init__(self, repeat: int = 1000):
        self.repeat = repeat

    def open(self, conf, context):
        self.todo = list(range(self.repeat * len(CORPUS)))
        self.todo.reverse()
        self.unacked = set()

    def next_tuple(self):
        if not self.todo:
            if not self.unacked:
                self.finish()
            return
        i = self.todo.pop()
        self.unacked.add(i)
        self.emit([CORPUS[i % len(CORPUS)]], msg_id=i)

    def ack(self, msg_id):
        self.unacked.discard(msg_id)

    def fail(self, msg_id):
        self.unacked.discard(msg_id)
        self.todo.append(msg_id)


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


class Counter(StatefulBolt):
    outputs = ["word", "count"]

    def init_state(self, state):
        self.counts = state  # as of the last committed checkpoint

    def execute(self, tup):
        word = tup["word"]
        n = self.counts.get(word, 0) + 1
        self.counts.put(word, n)
        self.emit([word, n], anchors=[tup])
        self.ack(tup)  # held by the engine until the next checkpoint commits

    def cleanup(self):  # the state is closed after this
        self.final = dict(self.counts)
        top = sorted(self.final.items(), key=lambda kv: -kv[1])[:3]
        print(f"count: {len(self.final)} words, top {top}")

    def result(self):
        return self.final


topology = Topology("stateful-wordcount", config={"topology.state.checkpoint.interval.ms": 200})
topology.set_spout("sentences", Sentences(), parallelism=1)
topology.set_bolt("split", Split(), parallelism=2).shuffle_grouping("sentences")
topology.set_bolt("count", Counter(), parallelism=2).fields_grouping("split", ["word"])


def expected_counts(repeat: int) -> dict[str, int]:
    """The true counts of `repeat` rounds of the corpus."""
    out: dict[str, int] = {}
    for sentence in CORPUS:
        for word in sentence.split():
            out[word] = out.get(word, 0) + repeat
    return out
