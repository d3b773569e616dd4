"""Word count whose counts survive a crash, each word counted once: sentences -> split ->
count, where split and count are StatefulBolts (Storm's IStatefulBolt) keeping their
state in a KeyValueState.

The engine adds the checkpoint spout: every `topology.state.checkpoint.interval.ms` the
state of both is prepared and committed (a SQLite file per task in the worker's data
directory), and each tuple is acked only once the checkpoint after it has committed. A
worker killed mid-run comes back with the state of the last commit, every bolt rolls
back to it, and the spout replays every sentence whose tree had not completed.

The source is replayable, as a Kafka topic is: sentence `o` of the corpus is offset `o`,
and the offsets whose trees completed are journaled where the topology keeps its state.
A spout restarted in a new process (its worker died) reads the journal and emits only
the rest (one that started again from the first sentence counted a quarter of the words
twice). What it cannot know is a sentence whose words were committed while the news of
it (its tree's acks) died with the spout's worker: the spout emits it again. Split
remembers, in its state, the offsets it has split; those are committed in the same
checkpoints as the counts, so such a sentence is acked and not split again, and every
word is counted exactly once (docs/state.md).

Run it with `stormish run -w 2 topologies/stateful_wordcount.py`.
"""

import os

from stormish import Spout, Topology
from stormish.state import StatefulBolt
from stormish.state.factory import DATA_ENV

CORPUS = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]


class OffsetJournal:
    """The offsets whose trees completed, one line each, appended with one `write` (a
    process killed -9 keeps what it wrote: the kernel has it). In `directory`, or in
    memory only when there is none (a single in-process worker: nothing restarts)."""

    def __init__(self, directory, name):
        self.path = None if directory is None else os.path.join(directory, name + ".offsets")
        self.fd = None

    def read(self):
        if self.path is None or not os.path.exists(self.path):
            return set()
        with open(self.path) as fh:
            return {int(line) for line in fh if line.strip().isdigit()}

    def add(self, offset):
        if self.path is None:
            return
        if self.fd is None:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(self.fd, b"%d\n" % offset)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def state_directory(conf, context):
    """Where the topology keeps its state (docs/state.md): `topology.state.dir`, else the
    worker's data directory; None for a worker that cannot restart."""
    base = conf.get("topology.state.dir")
    if not base:
        data = os.environ.get(DATA_ENV)
        if not data:
            return None
        base = os.path.join(data, "state")
    return os.path.join(base, context.topology_name)


class Sentences(Spout):
    """A finite, replayable source: sentence `o` (its offset) of `repeat` rounds of the
    corpus; a failed tree is replayed; finishes once every offset's tree completed."""

    outputs = ["sentence", "offset"]

    def __init__(self, repeat: int = 1000):
        self.repeat = repeat

    def open(self, conf, context):
        name = f"{context.component_id}-{context.task_id}"
        self.journal = OffsetJournal(state_directory(conf, context), name)
        done = self.journal.read()  # what an earlier process of this task completed
        self.todo = [o for o in range(self.repeat * len(CORPUS)) if o not in done]
        self.todo.reverse()
        self.unacked = set()

    def next_tuple(self):
        for _ in range(32):
            if not self.todo:
                if not self.unacked:
                    self.finish()
                return
            o = self.todo.pop()
            self.unacked.add(o)
            self.emit([CORPUS[o % len(CORPUS)], o], msg_id=o)

    def ack(self, offset):
        self.unacked.discard(offset)
        self.journal.add(offset)

    def fail(self, offset):
        self.unacked.discard(offset)
        self.todo.append(offset)

    def close(self):
        self.journal.close()


class Split(StatefulBolt):
    """Each offset's sentence split once: a sentence emitted again after its words were
    committed is acked without a word. The offsets split since the last commit are
    rolled back with the counts (the state is one checkpoint), so a sentence replayed
    because its words were rolled back is split again. Offsets come by fields grouping:
    an offset goes to the same task every time."""

    outputs = ["word"]

    def init_state(self, state):
        self.split = state  # offset -> True, as of the last committed checkpoint

    def execute(self, tup):
        sentence, offset = tup.values
        if offset not in self.split:
            self.split.put(offset, True)
            for word in sentence.split():
                self.emit([word], anchors=[tup])
        self.ack(tup)


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


def make(name: str = "stateful-wordcount", repeat: int = 1000, **config) -> Topology:
    t = Topology(name, config={"topology.state.checkpoint.interval.ms": 200, **config})
    t.set_spout("sentences", Sentences(repeat), parallelism=1)
    t.set_bolt("split", Split(), parallelism=2).fields_grouping("sentences", ["offset"])
    t.set_bolt("count", Counter(), parallelism=2).fields_grouping("split", ["word"])
    return t


topology = make()


def expected_counts(repeat: int) -> dict[str, int]:
    """The true counts of `repeat` rounds of the corpus."""
    out: dict[str, int] = {}
    for sentence in CORPUS:
        for word in sentence.split():
            out[word] = out.get(word, 0) + repeat
    return out
