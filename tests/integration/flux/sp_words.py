"""streamparse components named directly by a Flux file's className."""

from collections import Counter

from streamparse import Bolt, Spout

WORDS = ["a", "b", "a", "c", "a", "b"]


class Words(Spout):
    outputs = ["word"]

    def initialize(self, conf, ctx):
        self.left = list(WORDS)

    def next_tuple(self):
        if self.left:
            self.emit([self.left.pop(0)])
        else:
            self.finish()  # stormish's: a finite run


class Count(Bolt):
    outputs = ["word", "count"]

    def initialize(self, conf, ctx):
        self.counts = Counter()

    def process(self, tup):
        self.counts[tup.values.word] += 1  # the namedtuple of the input's fields
        self.emit([tup.values.word, self.counts[tup.values.word]])


class Prefixed(Spout):
    """Set up by the Flux file: a property (`prefix`) and a config method (`repeat`)."""

    outputs = ["word"]
    prefix = "default"
    times = 1

    def repeat(self, n):
        self.times = n

    def initialize(self, conf, ctx):
        self.left = [f"{self.prefix}-{w}" for w in ["x", "y"] * self.times]

    def next_tuple(self):
        if self.left:
            self.emit([self.left.pop(0)])
        else:
            self.finish()
