"""The overflow limit under a reliable topology on two workers (`LocalCluster(workers=2)`):
past `topology.executor.overflow.limit`, tuples from another worker to a task are
dropped and counted; the trees they belonged to time out and the spout replays them.

The upstream is never told of the backpressure (`topology.link.status.filter` set to
`LoseStatuses(-1)`, as in tests/integration/test_workers.py), so the spout floods the slow sink
up to `max.spout.pending` and drops must happen. What must hold, exactly: every tuple
the spout sent was either executed by the sink or dropped (sent = delivered + dropped),
and the sink's own record agrees; and at least once: every id acked, none lost.
"""

from __future__ import annotations

import time

import pytest

from stormish import LocalCluster, Topology
from stormish.testing import LoseStatuses, poll_for

from .ledger import LedgerSink, LedgerSpout, audit, deliveries

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

IDS = 20_000
LIMIT = 256


def flood(name: str, ledger: str) -> Topology:
    """src and the acker on worker 0, the sink (~0.1 ms a tuple) alone on worker 1."""
    t = Topology(
        name,
        config={
            "topology.workers": 2,
            "topology.acker.executors": 1,
            "topology.executor.receive.buffer.size": 1024,
            "topology.producer.batch.size": 128,
            "topology.transfer.buffer.size": 50,
            "topology.executor.overflow.limit": LIMIT,
            "topology.link.status.filter": LoseStatuses(-1),  # the upstream is never told
            "topology.max.spout.pending": 3000,  # > queue + limit: the flood overflows
            "topology.message.timeout.secs": 3,
        },
    )
    t.set_spout("src", LedgerSpout(ledger, IDS, per_call=100))
    t.set_bolt("sink", LedgerSink(ledger, work=0.0001)).shuffle_grouping("src")
    return t


def test_overflow_limit_drops_are_counted_exactly_and_replayed(watch, ledger):
    t0 = time.monotonic()
    with LocalCluster(workers=2) as c:
        c.submit(flood("ovl", ledger))
        poll_for(lambda: deliveries(ledger) > 0, 60, 0.05, "the run under way")
        watch.begin()
        final = c.wait_complete("ovl", timeout=150)
        watch.freeze()
    where = {s.component: s.worker for s in final.tasks.values()}
    assert where["src"] == where["__acker"] != where["sink"], where
    up, down = final.links[f"worker-{where['src']}"], final.links[f"worker-{where['sink']}"]
    sent = final.components["src"].emitted  # each emit: one tuple, to the sink's worker
    delivered = final.components["sink"].executed
    dropped = down["dropped"].get("overflow_limit", 0)
    a = audit(ledger, IDS)
    watch.figures.update(
        a.figures(),
        complete_s=round(time.monotonic() - t0, 2),
        sent=sent,
        sink_executed=delivered,
        dropped_overflow_limit=dropped,
        timed_out=final.components["src"].timed_out,
    )
    assert final.status == "complete"
    assert dropped > 0  # the limit was reached: this run tested something
    assert sent == delivered + dropped  # exactly: nothing lost uncounted
    assert a.delivered == delivered  # the sink's record agrees with the engine's count
    assert down["dropped"] == {"overflow_limit": dropped} and up["dropped"] == {}
    assert a.lost == 0 and a.never_acked == 0 and a.strangers == 0, a
    assert a.failed >= dropped  # each dropped tuple's tree failed and was replayed
