"""A cycle that multiplies its tuples, overloaded, completes: its two bolts in different
worker processes, or in one.

ping -> pong -> ping, with ping doubling every tuple it passes on, so the cycle
multiplies what the spout injects: the tuples inside it outgrow both executors' drain
budgets (`topology.cycle.drain.budget`, small here so that it happens at once). Before
the fix both pendingEmitQs held their whole budget, each parked on the other's remote
backpressure flag, neither consumed, so neither overflowQ drained and neither flag
cleared: the run stalled for good (both workers parked, ~3k of 80k tuples done). Now a
cycle executor with its budget spent sends past the flag into the other worker's
overflowQ (transport/remote.py, CycleTarget), and the spouts feeding the cycle hear of
the congestion of a cycle executor in another worker (WorkerLink.announce_cycle).

Inside one worker the same shape, with more fan-out, stalled the same way on full
local queues (both pendingEmitQs at their budget, each parked on the other's full
queue); a cycle executor with its budget spent now places into the local task's
overflowQ (runtime/cycle_target.py, LocalCycleTarget).

No `topology.max.spout.pending` (None) and small receive queues: the shape that
deadlocked; with acking off and on.
"""

from __future__ import annotations

from typing import Any

import pytest

from stormish import BasicBolt, LocalCluster, Spout, Topology
from stormish.testing import poll_for

pytestmark = [pytest.mark.usefixtures("no_leaks"), pytest.mark.timeout(90)]

ITEMS = 20_000
HOPS = 4  # ping at hops 0 and 2 doubles; a tuple leaves the cycle at hop 4
FAN = 2
DONE = ITEMS * FAN ** (HOPS // 2)  # what reaches hop 4: 80,000
# completes in ~2 s here; the old code stalled within the first second
COMPLETE_WITHIN = 30.0


class Items(Spout):
    outputs = ["id", "hops"]

    def __init__(self, count: int, reliable: bool):
        self.count = count
        self.reliable = reliable

    def open(self, conf: Any, context: Any) -> None:
        self.next_id = 0

    def next_tuple(self) -> None:
        for _ in range(64):
            if self.next_id >= self.count:
                self.finish()
                return
            i = self.next_id
            self.emit([i, 0], msg_id=i if self.reliable else None)
            self.next_id += 1


class Ping(BasicBolt):
    """Multiplies each tuple by `fan` on its way round; counts the tuples that made
    `hops` hops."""

    outputs = ["id", "hops"]

    def __init__(self, fan: int = FAN, hops: int = HOPS):
        self.fan, self.hops = fan, hops

    def prepare(self, conf: Any, context: Any) -> None:
        self.done = 0

    def execute(self, tup: Any) -> None:
        i, hops = tup.values
        if hops >= self.hops:
            self.done += 1
            return
        for _ in range(self.fan):
            self.emit([i, hops + 1])

    def result(self) -> int:
        return self.done


class Pong(BasicBolt):
    outputs = ["id", "hops"]

    def execute(self, tup: Any) -> None:
        i, hops = tup.values
        self.emit([i, hops + 1])


def cycle(
    name: str, acking: bool, items: int = ITEMS, fan: int = FAN, hops: int = HOPS
) -> Topology:
    t = Topology(
        name,
        config={
            "topology.acker.executors": None if acking else 0,
            "topology.max.spout.pending": None,
            "topology.executor.receive.buffer.size": 64,
            "topology.cycle.drain.budget": 1024,
        },
    )
    t.set_spout("items", Items(items, acking))
    t.set_bolt("ping", Ping(fan, hops)).shuffle_grouping("items").shuffle_grouping("pong")
    t.set_bolt("pong", Pong()).shuffle_grouping("ping")
    return t


@pytest.mark.parametrize("acking", [False, True], ids=["acking-off", "acking-on"])
def test_cycle_across_two_workers_completes_under_overload(acking: bool) -> None:
    name = f"cycle2w-{'ack' if acking else 'noack'}"
    with LocalCluster(workers=2) as c:
        c.submit(cycle(name, acking))
        try:
            final = c.wait_complete(name, timeout=COMPLETE_WITHIN)
        except TimeoutError:
            s = c.statistics(name)
            held = {
                f"{t.component}[{t.task}]@w{t.worker}": (t.pending_emits, t.overflow)
                for t in s.tasks.values()
            }
            pytest.fail(f"the cycle stalled: (pendingEmitQ, overflowQ) per task {held}")
        results = c._get(name).results()
        by = {t.component: t for t in final.tasks.values()}
        # the cycle really crosses: ping and pong in different worker processes
        assert by["ping"].worker != by["pong"].worker
        assert results["ping"] == [DONE]
        assert by["ping"].executed == ITEMS * (1 + FAN + FAN**2)
        assert by["pong"].executed == ITEMS * (FAN + FAN**2)
        if acking:
            assert by["items"].acked == ITEMS and by["items"].failed == 0
        links = final.links
        # the budgets were spent: the deadlock's shape was reached and got through
        assert sum(link["cycle_past_flag"] for link in links.values()) > 0
        # ping's congestion was announced to the spout's worker, and cleared there at
        # the end (a congestion left set would pause the spouts for good)
        spout_w = f"worker-{by['items'].worker}"
        ping_w = f"worker-{by['ping'].worker}"
        assert links[ping_w]["cycle_sent"] > 0 and links[spout_w]["cycle_received"] > 0
        poll_for(
            lambda: all(not x["cycle_congested_peers"] for x in c.statistics(name).links.values()),
            timeout=10,
            what="the cycle's congestion cleared in every worker",
        )


def stalled(c: LocalCluster, name: str) -> str:
    s = c.statistics(name)
    held = {
        f"{t.component}[{t.task}]@w{t.worker}": (t.pending_emits, t.overflow)
        for t in s.tasks.values()
    }
    return f"the cycle stalled: (pendingEmitQ, overflowQ) per task {held}"


@pytest.mark.parametrize("acking", [False, True], ids=["acking-off", "acking-on"])
def test_a_multiplying_cycle_in_one_worker_completes_under_overload(acking: bool) -> None:
    """Fan-out 4 over three rounds of ping: 2,000 items become 128,000 at hop 6. The old
    code stalled at ~700 of ping's executes, both budgets (1,024) full."""
    name = f"cycle1w-{'ack' if acking else 'noack'}"
    items, fan, hops = 2_000, 4, 6
    with LocalCluster(workers=1) as c:
        c.submit(cycle(name, acking, items, fan, hops))
        try:
            final = c.wait_complete(name, timeout=COMPLETE_WITHIN)
        except TimeoutError:
            pytest.fail(stalled(c, name))
        by = {t.component: t for t in final.tasks.values()}
        assert c._get(name).results()["ping"] == [items * fan ** (hops // 2)]
        assert by["ping"].executed == items * sum(fan**k for k in range(hops // 2 + 1))
        assert by["pong"].executed == items * sum(fan**k for k in range(1, hops // 2 + 1))
        if acking:
            assert by["items"].acked == items and by["items"].failed == 0
        # the budget was spent and got through: what it placed waited in overflowQs
        assert max(t.overflow_high for t in final.tasks.values()) > 0
