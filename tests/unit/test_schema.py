"""Typed streams: a Schema or a dataclass declares a stream's fields
and types; emits are checked in debug mode only, with an error naming component, stream
and field."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from stormish import BasicBolt, LocalCluster, Schema, Spout, Topology, TopologyError, WorkerError
from stormish.testing import CaptureBolt


@dataclass
class Reading:
    sensor: str
    value: float | None


class Typed(Spout):
    outputs = Schema(word=str, count=int)
    streams = None

    def __init__(self, rows):
        self.rows = rows

    def open(self, conf, context):
        self.i = 0

    def next_tuple(self):
        if self.i >= len(self.rows):
            self.finish()
            return
        self.emit(self.rows[self.i])
        self.i += 1


class Readings(BasicBolt):
    streams = {"readings": Reading, "raw": ["x"]}

    def execute(self, tup):
        self.emit(("s1", 1.5), stream="readings")
        self.emit(("s2", None), stream="readings")
        self.emit_many([(tup.values[0],)], stream="raw")


def test_schemas_and_dataclasses_declare_fields_and_types():
    assert Typed([]).declared_streams() == {"default": ("word", "count")}
    assert Readings().declared_streams() == {"readings": ("sensor", "value"), "raw": ("x",)}
    (s,) = Readings().declared_schemas().values()
    assert s.fields == ("sensor", "value") and s.types["value"] == (float, type(None))
    assert repr(Schema(word=str, n=int)) == "Schema(word=str, n=int)"
    with pytest.raises(TopologyError, match="'n': 5 is not a type"):
        Schema(n=5)


def run(rows, **conf):
    t = Topology("typed", config={"topology.acker.executors": 0, **conf})
    t.set_spout("src", Typed(rows))
    t.set_bolt("sink", CaptureBolt()).shuffle_grouping("src")
    t.set_bolt("readings", Readings()).shuffle_grouping("src")
    t.set_bolt("r", CaptureBolt()).shuffle_grouping("readings", "readings")
    with LocalCluster() as cluster:
        cluster.submit(t)
        return cluster.wait_complete("typed", timeout=60)


def test_a_wrong_type_is_an_error_in_debug_mode_naming_component_stream_and_field():
    ok = run([("a", 1), ("b", 2)], **{"topology.typecheck": True})
    assert ok.components["r"].executed == 4 and ok.components["sink"].errors == 0
    with pytest.raises(WorkerError) as e:  # a broken stream contract stops the task
        run([("a", 1), ("b", "2")], **{"topology.typecheck": True})
    msg = str(e.value)
    assert "component 'src' emitted on stream 'default' field 'count' a str ('2')" in msg
    assert "its schema wants int" in msg
    assert "in Typed.next_tuple at " + __file__ in msg  # the user's emit, not the check


def test_without_debug_mode_nothing_is_checked():
    stats = run([("a", 1), ("b", "2")])
    assert stats.components["sink"].executed == 2
    assert all(not t.last_errors for t in stats.tasks.values())
