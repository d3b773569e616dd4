"""A run's workers tell it when their spouts are done, so that it looks for the end at
once rather than at its next back-off poll (runtime/nudge.py): in this process, in
forked and in spawned worker processes, acking on and off; and not before every spout
of a worker is done."""

from __future__ import annotations

import os
import time

import pytest

from stormish import BasicBolt, LocalCluster, Spout, Topology
from stormish.testing import ListSpout

pytestmark = pytest.mark.usefixtures("no_leaks")  # no process or socket left (conftest)


class Null(BasicBolt):
    def execute(self, tup):
        pass


def topology(name: str, start: str) -> Topology:
    t = Topology(name, config={"topology.worker.start": start})
    t.set_spout("s", ListSpout([[i] for i in range(200)]), parallelism=2)
    t.set_bolt("null", Null(), parallelism=2).shuffle_grouping("s")
    return t


WHERE = pytest.mark.parametrize(
    ("workers", "start"),
    [(1, "fork"), (2, "fork"), (2, "spawn")],
    ids=["in-process", "forked", "spawned"],  # one worker runs in this process
)


@pytest.mark.parametrize("acking", [0, 1])
@WHERE
def test_the_run_hears_when_the_spouts_are_done(workers, start, acking):
    t = topology(f"nudge-{workers}-{start}-{acking}", start)
    with LocalCluster(workers=workers, config={"topology.acker.executors": acking}) as c:
        c.submit(t, active=False)
        running = c._get(t.name)
        assert running._nudge.wait(0) is False  # inactive: no spout has done anything
        c.activate(t.name)
        assert running._nudge.wait(60) is True  # without the word: False after 60 s
        stats = c.wait_complete(t.name, timeout=60)
    assert stats.components["null"].executed == 400  # each spout task emits all 200


class UntilFile(Spout):
    """Emits one tuple, then finishes once `path` exists (seen from any process)."""

    outputs = ["v"]

    def __init__(self, path):
        self.path = path

    def open(self, conf, context):
        self.sent = False

    def next_tuple(self):
        if not self.sent:
            self.sent = True
            self.emit((1,))
        elif os.path.exists(self.path):
            self.finish()


@WHERE
def test_a_backed_off_run_ends_at_the_word_not_at_its_next_look(tmp_path, workers, start):
    """The run's wait is on the pipe: with its next look 60 s away (a long busy run's
    back-off, stretched), it still ends at once when the spout finishes."""
    flag = tmp_path / "go"
    t = Topology(f"nudge-wait-{workers}-{start}", config={"topology.worker.start": start})
    t.set_spout("s", UntilFile(str(flag)))
    t.set_bolt("null", Null(), parallelism=2).shuffle_grouping("s")
    with LocalCluster(workers=workers, config={"topology.acker.executors": 0}) as c:
        c.submit(t)
        running = c._get(t.name)
        running._interval = 60.0
        running._next_look = time.monotonic() + 60.0
        flag.touch()
        assert running.poll_complete(30) is True  # without the word: no look for 30 s
        assert running.statistics().components["null"].executed == 1


def test_no_word_while_a_spout_of_the_worker_still_runs(tmp_path):
    flag = tmp_path / "go"
    t = Topology("nudge-held")
    t.set_spout("quick", ListSpout([[i] for i in range(10)]))
    t.set_spout("held", UntilFile(str(flag)))
    t.set_bolt("null", Null()).shuffle_grouping("quick").shuffle_grouping("held")
    with LocalCluster(config={"topology.acker.executors": 1}) as c:
        c.submit(t)
        running = c._get(t.name)
        # 'quick' is done within ms; 'held' is not: a word now would be early
        assert running._nudge.wait(0.5) is False
        flag.touch()
        assert running._nudge.wait(60) is True
        stats = c.wait_complete(t.name, timeout=60)
    assert stats.components["null"].executed == 11
