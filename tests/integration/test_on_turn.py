"""Bolt.on_turn, the engine's hook for work that completes outside `execute` (a client's
callbacks): called on the task's thread every turn, input or not, and the task takes no
input while it returns True (parked as under backpressure)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from stormish import Bolt, Topology
from stormish.testing import ListSpout, run_topology

HOLD_AT = 40


class Outside(Bolt):
    """Takes tuples without settling them; each turn settles at most 5 that are older
    than `delay` seconds (as a delivery report would, later) and holds input while more
    than HOLD_AT are unsettled."""

    def __init__(self, delay: float = 0.0):
        self.delay = delay

    def prepare(self, conf: Any, context: Any) -> None:
        self.pending: list[tuple[float, Any]] = []
        self.most = 0
        self.held_turns = 0
        self.turned_without_input = False

    def execute(self, tup: Any) -> None:
        self.pending.append((time.monotonic(), tup))
        self.most = max(self.most, len(self.pending))

    def on_turn(self) -> bool:
        now = time.monotonic()
        n = 0
        while self.pending and n < 5 and now - self.pending[0][0] >= self.delay:
            self.ack(self.pending.pop(0)[1])
            n += 1
        held = len(self.pending) > HOLD_AT
        self.held_turns += held
        return held

    def result(self) -> dict[str, int]:
        return {"most": self.most, "held_turns": self.held_turns}


@pytest.mark.timeout(60)
def test_input_is_held_while_on_turn_says_so_and_everything_settles() -> None:
    t = Topology("on-turn", config={"topology.executor.receive.buffer.size": 64})
    t.set_spout("src", ListSpout([(i,) for i in range(3000)], per_call=64))
    t.set_bolt("out", Outside()).shuffle_grouping("src")
    r = run_topology(t, timeout=50)
    spout, bolt = r.results["src"][0], r.results["out"][0]
    assert len(spout["acked"]) == 3000 and not spout["failed"]
    assert bolt["held_turns"] > 0, "never held: the test proves nothing"
    # held from HOLD_AT on: at most one turn's takes more (a take is <= the queue's budget)
    assert bolt["most"] <= HOLD_AT + 16 * 64, bolt
    assert r.stats.components["out"].backpressure_seconds > 0


@pytest.mark.timeout(60)
def test_on_turn_runs_with_no_input_so_late_settles_complete_the_run() -> None:
    """The last tuples settle 0.2 s after they came, when no more input comes: only
    turns without input can settle them (else the run would wait for the timeout)."""
    t = Topology("on-turn-idle", config={"topology.message.timeout.secs": 30})
    t.set_spout("src", ListSpout([(i,) for i in range(20)]))
    t.set_bolt("out", Outside(delay=0.2)).shuffle_grouping("src")
    t0 = time.monotonic()
    r = run_topology(t, timeout=20)
    assert len(r.results["src"][0]["acked"]) == 20
    assert time.monotonic() - t0 < 10  # not the 30 s message timeout
