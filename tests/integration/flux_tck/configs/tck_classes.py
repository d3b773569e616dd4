"""Python stand-ins for the Java classes Storm's flux-core test configs name
(org.apache.storm.testing.*, org.apache.storm.flux.test.*, LogInfoBolt, java.time.Duration),
so that the TCKTest configs, ported beside this file, build in stormish with the
structure Storm's FluxBuilder gives them."""

from __future__ import annotations

import logging

from stormish import BasicBolt, Spout, Topology

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]


class TestWordSpout(Spout):
    """org.apache.storm.testing.TestWordSpout: a word at a time (finite here)."""

    outputs = ["word"]
    __test__ = False

    def open(self, conf, context) -> None:
        self.queue = list(WORDS)

    def next_tuple(self) -> None:
        if not self.queue:
            self.finish()
            return
        self.emit([self.queue.pop()])


class TestWordCounter(BasicBolt):
    """org.apache.storm.testing.TestWordCounter: (word, count)."""

    outputs = ["word", "count"]
    __test__ = False

    def prepare(self, conf, context) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup) -> None:
        w = tup.values[0]
        self.counts[w] = self.counts.get(w, 0) + 1
        self.emit([w, self.counts[w]])


class LogInfoBolt(BasicBolt):
    """org.apache.storm.flux.wrappers.bolts.LogInfoBolt: logs each tuple, emits none."""

    def execute(self, tup) -> None:
        logging.getLogger("tck_classes.LogInfoBolt").info("%s", tup.values)


class EchoLogBolt(LogInfoBolt):
    """LogInfoBolt that passes each tuple on: Storm's LogInfoBolt declares no stream, so
    diamond-topology.yaml's A -> B subscribes to a stream A does not have (Storm's nimbus
    refuses that at submit; stormish when the topology is built)."""

    outputs = ["word"]

    def execute(self, tup) -> None:
        super().execute(tup)
        self.emit([tup.values[0]])


class NGrouping:
    """org.apache.storm.testing.NGrouping: the first `n` of the sorted target tasks."""

    def __init__(self, n: int) -> None:
        self.n = n

    def prepare(self, target_tasks) -> None:
        self.tasks = sorted(target_tasks)[: self.n]

    def choose_tasks(self, values):
        return self.tasks


class TestClass:
    """TestBolt$TestClass: a value with equality by its field."""

    __test__ = False

    def __init__(self, field: str) -> None:
        self.field = field

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TestClass) and other.field == self.field

    def __hash__(self) -> int:
        return hash(self.field)


class Duration:
    """java.time.Duration, for `factory: ofHours`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    @classmethod
    def ofHours(cls, hours: int) -> Duration:  # noqa: N802 - Java's name
        return cls(hours * 3600)


class TestBolt(BasicBolt):
    """org.apache.storm.flux.test.TestBolt: constructor args, factories, config methods
    and a property, recorded for the test to check."""

    __test__ = False

    def __init__(self, *args) -> None:
        self.args = args
        self.foo = self.bar = self.foo_bar = self.none = None
        self.classes: list[TestClass] = []
        self.durations: list = []
        self.time_len = None

    @classmethod
    def newInstance(cls, *args) -> TestBolt:  # noqa: N802
        return cls(*args)

    @classmethod
    def newLongInstance(cls, value: int) -> TestBolt:  # noqa: N802
        return cls(value)

    def withFoo(self, foo: str) -> None:  # noqa: N802
        self.foo = foo

    def withNone(self) -> None:  # noqa: N802
        self.none = "hit"

    def withBar(self, bar: str) -> None:  # noqa: N802
        self.bar = bar

    def withFooBar(self, foo: str, bar: str) -> None:  # noqa: N802
        self.foo_bar = foo + bar

    def withClasses(self, classes: list[TestClass]) -> None:  # noqa: N802
        self.classes = list(classes)

    def withDuration(self, d: Duration) -> None:  # noqa: N802
        self.durations.append(d)

    def withDurationArr(self, ds: list[Duration]) -> None:  # noqa: N802
        self.durations.extend(ds)

    def setTimeLenArr(self, ds: list[Duration]) -> None:  # noqa: N802
        self.durations.extend(ds)

    def setTimeLen(self, d: Duration) -> None:  # noqa: N802
        self.time_len = d

    def execute(self, tup) -> None:
        pass


def _simple(config) -> Topology:
    """SimpleTopology's topology: a word spout into a counter, fields-grouped."""
    t = Topology("simple", config={"topology.workers": 1})
    t.set_spout("words", TestWordSpout())
    t.set_bolt("count", TestWordCounter()).fields_grouping("words", ["word"])
    return t


class SimpleTopologySource:
    """org.apache.storm.flux.test.SimpleTopologySource (a TopologySource)."""

    def __init__(self, foo: str = "", bar: str = "") -> None:
        self.args = (foo, bar)

    def getTopology(self, config) -> Topology:  # noqa: N802
        return _simple(config)


class SimpleTopology(SimpleTopologySource):
    """org.apache.storm.flux.test.SimpleTopology: found by reflection, and by methodName."""

    def getTopologyWithDifferentMethodName(self, config) -> Topology:  # noqa: N802
        return self.getTopology(config)


SimpleTopologyWithConfigParam = SimpleTopologySource  # Java's Config param: a dict here
