"""An ordered_lanes edge routes a key to task `lane_of(key, lanes) % n` whichever way it
is emitted (a key always reaches the same task: its lane's order depends on it).

Found porting the fields-grouping consistency scenarios of Storm's grouping tests: the
compiled bulk path (rowcodec.route_str, for `emit_many` of str keys) and the compiled
one-stream emit (rowcodec.Emitter) computed a str key's task as crc32 % n, a plain
fields grouping's, for an ordered_lanes edge too, whose task is (crc32 % lanes) % n:
with 3 lanes on 2 tasks, 22 of 40 keys went to another task by `emit_many` than by
`emit`, so a component mixing the two sent one key to two tasks, out of order."""

from __future__ import annotations

import pytest

from stormish import Topology
from stormish.runtime.acker import AckerBolt
from stormish.runtime.emitters import make_collector
from stormish.runtime.grouping import lane_of
from stormish.runtime.plan import build_plan
from stormish.runtime.queue import ReceiveQueue

from .idle import IdleBasicBolt, IdleBolt, IdleSpout

pytestmark = pytest.mark.timeout(60)

TASKS = 3
KEYS = [f"k{i}" for i in range(40)] + [7, 8, 9, ("t", 1)]


class Src(IdleSpout):
    outputs = ["key", "n"]


class Mid(IdleBolt):
    outputs = ["key", "n"]


class MidBasic(IdleBasicBolt):
    outputs = ["key", "n"]


ROLES = ["untracked", "spout", "reliable_spout", "bolt", "basic_bolt"]


def collector(role: str, lanes: int):
    acking = role != "untracked"
    t = Topology("lanes", config={} if acking else {"topology.acker.executors": 0})
    t.set_spout("src", Src())
    source = "src"
    if role in ("bolt", "basic_bolt"):
        t.set_bolt("mid", Mid() if role == "bolt" else MidBasic()).shuffle_grouping("src")
        source = "mid"
    t.set_bolt("sink", IdleBolt(), parallelism=TASKS).ordered_lanes(source, ["key"], lanes=lanes)
    plan = build_plan(t, t.validate(), AckerBolt())
    (task,) = plan.tasks[source]
    queues = {x: ReceiveQueue(1 << 16) for x in plan.task_component}
    coll = make_collector(plan, task, queues, set(queues), 1024, basic=role == "basic_bolt")
    coll.reliable = lambda *_a: None
    return coll, queues, plan.tasks["sink"]


def reached(role: str, how: str, lanes: int) -> dict:
    coll, queues, sinks = collector(role, lanes)
    rows = [(k, i) for i, k in enumerate(KEYS)]
    msg = {"msg_id": 1} if role == "reliable_spout" else {}
    if how == "emit_many":  # more than 16 rows: the bulk path
        coll.emit_many(rows, **msg)
    elif how == "emit_many_small":  # a row at a time
        for i in range(0, len(rows), 8):
            coll.emit_many(rows[i : i + 8], **msg)
    else:
        # the executors bind a role's bound emit where it has one (a plain Bolt's is
        # the method)
        bound = getattr(coll, "bound_emit", None) if role != "bolt" else None
        emit = bound() if how == "bound_emit" and bound is not None else coll.emit
        for r in rows:
            emit(r, **msg)
    coll.flush_all()
    where = {}
    for index, task in enumerate(sinks):
        while (batches := queues[task].consume()) is not None:
            for _src, _stream, values, _metas in batches:
                for v in values:
                    where[v[0]] = index
    return where


@pytest.mark.parametrize("lanes", [4, 64, 5000])  # 5000: past grouping._STR_LANES
@pytest.mark.parametrize("how", ["emit", "bound_emit", "emit_many", "emit_many_small"])
@pytest.mark.parametrize("role", ROLES)
def test_a_key_reaches_its_lanes_task_whatever_the_emit(role, how, lanes):
    if role == "reliable_spout" and how.startswith("emit_many"):
        pytest.skip("a spout's emit_many takes one msg_id per call: covered by emit")
    want = {k: lane_of(k, lanes) % TASKS for k in KEYS}
    assert reached(role, how, lanes) == want
