"""Python stand-ins for the Java classes Storm's flux-examples name: TestWordSpout,
TestWordCounter, LogInfoBolt (a finite spout here, so that a run completes and its
counts can be checked exactly)."""

from __future__ import annotations

import logging
from collections import Counter

from stormish import BasicBolt, Spout

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]  # Storm's TestWordSpout's


class TestWordSpout(Spout):
    """Storm's TestWordSpout's words, each `rounds` times, then finished."""

    outputs = ["word"]
    __test__ = False  # not a pytest class

    def __init__(self, rounds: int = 20):
        self.rounds = rounds
        self.prefix = ""

    def setPrefix(self, prefix: str) -> None:  # noqa: N802 - a Flux property setter
        self.prefix = prefix

    def open(self, conf, context) -> None:
        self.queue = [self.prefix + w for _ in range(self.rounds) for w in WORDS]
        self.queue.reverse()

    def next_tuple(self) -> None:
        if not self.queue:
            self.finish()
            return
        w = self.queue.pop()
        self.emit([w], msg_id=w + str(len(self.queue)))


class TestWordCounter(BasicBolt):
    """Storm's TestWordCounter: (word, count) per word seen."""

    outputs = ["word", "count"]
    __test__ = False

    def prepare(self, conf, context) -> None:
        self.counts: Counter[str] = Counter()

    def execute(self, tup) -> None:
        w = tup["word"]
        self.counts[w] += 1
        self.emit([w, self.counts[w]])

    def result(self) -> dict[str, int]:
        return dict(self.counts)


class LogInfoBolt(BasicBolt):
    """Storm's LogInfoBolt: logs each tuple at INFO; keeps the last count per word."""

    def prepare(self, conf, context) -> None:
        self.last: dict[str, int] = {}
        self.log = logging.getLogger("flux_words.LogInfoBolt")

    def execute(self, tup) -> None:
        self.log.info("%s", tup.values)
        self.last[tup.values[0]] = tup.values[1]

    def result(self) -> dict[str, int]:
        return dict(self.last)


class Rounds:
    """A component for `ref`: how many rounds, set by a config method."""

    def __init__(self) -> None:
        self.n = 1

    def withRounds(self, n: int) -> Rounds:  # noqa: N802
        self.n = n
        return self


class RoundsSpout(TestWordSpout):
    def __init__(self, rounds: Rounds):
        super().__init__(rounds.n)


class Source:
    """A topologySource: getTopology(config) builds the topology in Python."""

    def getTopology(self, config):  # noqa: N802
        from stormish import Topology

        t = Topology("from-source", config={"topology.workers": 1})
        t.set_spout("spout", TestWordSpout(config.get("rounds", 2)))
        t.set_bolt("count", TestWordCounter(), 2).fields_grouping("spout", ["word"])
        return t


class Picker:
    """A component a custom grouping refers to (`ref`): which of the tasks to pick."""

    def __init__(self, index: int) -> None:
        self.index = index


class ToPicked:
    """A CUSTOM grouping built with a `ref` to a component, as Storm's
    buildCustomStreamGrouping builds it (buildObject: refs resolved)."""

    def __init__(self, picker: Picker) -> None:
        self.picker = picker

    def prepare(self, target_tasks):
        self.tasks = list(target_tasks)

    def choose_tasks(self, values):
        return [self.tasks[self.picker.index]]
