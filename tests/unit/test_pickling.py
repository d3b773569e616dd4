"""What users wrote keeps its file names and lines on the way to executors and workers."""

from __future__ import annotations

import traceback

import cloudpickle

from stormish import pickling
from stormish.loader import load_topology_file

TOPOLOGY = """
from stormish import BasicBolt, Topology
from stormish.testing import ListSpout


class Parse(BasicBolt):
    outputs = ["n"]

    def execute(self, tup):
        check = lambda v: int(v)  # noqa: E731 - a nested code object too
        self.emit((check(tup.values[0]),))


topology = Topology("rows")
topology.set_spout("rows", ListSpout([("1",)]))
topology.set_bolt("parse", Parse()).shuffle_grouping("rows")
"""


def test_a_topology_file_s_code_keeps_its_file_and_lines_through_a_round_trip(tmp_path):
    path = tmp_path / "rows.py"
    path.write_text(TOPOLOGY)
    topology, _ = load_topology_file(path)
    bolt = topology.components["parse"].obj
    copy = cloudpickle.loads(pickling.dumps(bolt))
    assert copy is not bolt and type(copy).__name__ == "Parse"
    try:
        copy.execute(type("T", (), {"values": ("x",)})())
    except ValueError as exc:
        frames = traceback.extract_tb(exc.__traceback__)
    else:
        raise AssertionError("int('x') raised nothing")
    assert [(f.filename, f.lineno) for f in frames[-2:]] == [(str(path), 11), (str(path), 10)]
    assert frames[-1].line == "check = lambda v: int(v)  # noqa: E731 - a nested code object too"
