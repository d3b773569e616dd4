"""Several nimbus on a real ZooKeeper (Debian's, started per test: tests/zk_server.py),
under the ledger's reliable pipeline (ledger.py: every id audited from outside the
workers): kill -9 of the leader during a steady run, a submit and a rebalance;
ZooKeeper down for 10 s; a leader partitioned from ZooKeeper (SIGSTOP past its session)
that must not act once another leads, asserted from ZooKeeper's own record of who
assigned what.

Each cluster runs with `nimbus.leader.failover.secs` 4 (the session timeout): a follower
takes over within about that after a kill -9.
"""

from __future__ import annotations

import glob
import os
import signal
import threading
import time
from contextlib import closing

import pytest
from integration.ha_cluster import HaCluster
from zk_server import ZooKeeper

from stormish.testing import poll_for

from .conftest import call_failed
from .ledger import LedgerSink, audit, deliveries, pipeline

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

IDS = 6_000
WORK = 0.002
CONF = {"topology.message.timeout.secs": 3, "topology.max.spout.pending": 500}
FAILOVER = 4.0


@pytest.fixture
def ha(request, tmp_path, zk, watch):
    c = HaCluster(str(tmp_path), zk.hosts, failover=FAILOVER)
    watch.sample()
    yield c
    c.close()
    if call_failed(request.node):
        for name in c.logs():
            print(f"--- {name}\n{c.log(name)[-4000:]}")


def start(c: HaCluster, watch, name: str, ledger: str, count: int = IDS, topology=None) -> None:
    poll_for(lambda: len(c.call(0, "supervisors")) == 2, 30, 0.1, "two supervisors")
    t = topology or pipeline(name, ledger, count, WORK, **CONF)
    c.call(0, "submit", (t, {}))
    c.wait_status(0, name, "running")
    poll_for(lambda: len(c.workers()) == 2, 30, 0.1, "two workers")
    poll_for(lambda: deliveries(ledger) >= count // 5, 60, 0.05, "the run under way")
    watch.begin()


def finish(c: HaCluster, watch, via: int, name: str, ledger: str, count: int = IDS) -> None:
    c.wait_status(via, name, "complete", timeout=150)
    watch.freeze()
    a = audit(ledger, count)
    watch.figures.update(a.figures())
    assert a.lost == 0, f"acked ids missing from the sink: {a}"
    assert a.never_acked == 0 and a.acked == count, a
    assert a.strangers == 0, a


def test_kill_9_the_leader_during_a_steady_run(ha, watch, ledger):
    """The follower leads within the failover time, adopts both workers as they run
    (none restarted), and sees the run to completion: no acked id lost."""
    start(ha, watch, "steady", ledger)
    pids = {p.pid for p in ha.workers()}
    t0 = time.monotonic()
    before = deliveries(ledger)
    ha.kill_nimbus(0)
    # n0 is dead but holds the election until its session expires: n1 answers reads
    # from what n0 last wrote to ZooKeeper
    (row,) = [r for r in ha.call(1, "list") if r["name"] == "steady"]
    assert row["status"] == "running" and row.get("from_zookeeper"), row
    assert len(row["slots"]) == 2 and {w["state"] for w in row["worker_status"]} == {"running"}
    assert len(ha.call(1, "supervisors")) == 2
    watch.figures["read_from_zk_s"] = round(time.monotonic() - t0, 2)
    assert ha.wait_leader(not_=0, timeout=FAILOVER + 10) == 1
    watch.figures["new_leader_s"] = round(time.monotonic() - t0, 2)
    poll_for(
        lambda: all(f"steady: worker {i} adopted" in ha.log("n1.log") for i in (0, 1)),
        30, 0.05, "both workers adopted by the new leader",
    )  # fmt: skip
    watch.figures["adopted_s"] = round(time.monotonic() - t0, 2)
    watch.figures["delivered_meanwhile"] = deliveries(ledger) - before
    assert watch.figures["delivered_meanwhile"] > 0  # the topology never stopped
    assert watch.figures["new_leader_s"] < FAILOVER + 5
    finish(ha, watch, 1, "steady", ledger)
    assert {p.pid for p in ha.workers()} <= pids  # no worker restarted (some exited: done)
    assert audit(ledger, IDS).sink_processes == 2


def test_kill_9_the_leader_during_a_submit_leaves_nothing_of_it(ha, watch, ledger, zk):
    """The leader dies while it waits for its follower to hold the code (the follower
    is paused meanwhile): no topology exists on the new leader, its staged code is
    collected, and the same topology submitted again runs to completion."""
    poll_for(lambda: len(ha.call(0, "supervisors")) == 2, 30, 0.1, "two supervisors")
    follower = ha.nimbuses[1]
    assert follower is not None
    follower.send_signal(signal.SIGSTOP)  # it cannot fetch the code: the submit waits
    outcome: list[object] = []

    def submit() -> None:
        try:
            with closing(ha.client(0)) as c:
                outcome.append(
                    c.call("submit", (pipeline("sub", ledger, 2000, 0.0, **CONF), {}), timeout=5)
                )
        except Exception as exc:  # noqa: BLE001 - what the client saw is the point
            outcome.append(exc)

    t = threading.Thread(target=submit)
    t.start()
    try:
        poll_for(lambda: "staged" in _code_state(ha, zk), 20, 0.02, "the code staged")
        ha.kill_nimbus(0)
    finally:
        follower.send_signal(signal.SIGCONT)
    t.join(60)
    assert outcome and isinstance(outcome[0], Exception), outcome  # never acknowledged
    assert ha.wait_leader(not_=0, timeout=FAILOVER + 10) == 1
    assert all(r["name"] != "sub" for r in ha.call(1, "list"))  # nothing of it
    poll_for(lambda: _code_state(ha, zk) == "none", 10, 0.05, "its code collected")
    watch.begin()
    assert ha.call(1, "submit", (pipeline("sub", ledger, 2000, 0.0, **CONF), {})) == "sub"
    finish(ha, watch, 1, "sub", ledger, 2000)


def _code_state(ha: HaCluster, zk: ZooKeeper) -> str:
    from kazoo.client import KazooClient

    from stormish.cluster.ha import digest_credential
    from stormish.transport.keys import load

    client = KazooClient(
        hosts=zk.hosts, auth_data=[("digest", digest_credential(load(ha.keys)[1]))]
    )
    client.start(10)
    try:
        return "staged" if client.get_children(f"{ha.root}/code") else "none"
    finally:
        client.stop()
        client.close()


class SlowCleanupSink(LedgerSink):
    """The ledger's sink, whose cleanup (a worker stopping) waits for the file `gate`:
    the leader is then inside a rebalance, stopping the old workers."""

    def cleanup(self):
        open(os.path.join(self.ledger, f"cleaning-{os.getpid()}"), "w").close()
        gate = os.path.join(self.ledger, "gate")
        deadline = time.monotonic() + 30
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.02)  # user code that blocks: the scenario, not a synchronisation
        super().cleanup()


def test_kill_9_the_leader_during_a_rebalance(ha, watch, ledger):
    """Rebalanced to one worker, the leader killed while it stops the old workers (their
    cleanup holds it): the new leader finishes the rebalance from ZooKeeper's state (the
    new plan was saved before the old workers were stopped) and the run completes on one
    worker. (Without that write ahead, ZooKeeper still said two workers, running, and
    the new leader adopted the ones being stopped.)"""
    from stormish import Topology

    from .ledger import LedgerSpout, Relay

    t = Topology("rb", config={"topology.workers": 2, **CONF})
    t.set_spout("src", LedgerSpout(ledger, IDS))
    t.set_bolt("relay", Relay(), parallelism=2).shuffle_grouping("src")
    sink = SlowCleanupSink(ledger, WORK)
    t.set_bolt("sink", sink, parallelism=2).fields_grouping("relay", ["id"])
    start(ha, watch, "rb", ledger, topology=t)
    errors: list[Exception] = []

    def rebalance() -> None:
        try:
            with closing(ha.client(0)) as c:
                c.call("rebalance", ("rb", 1, 0), timeout=5)
        except Exception as exc:  # noqa: BLE001 - the leader dies under it
            errors.append(exc)

    th = threading.Thread(target=rebalance)
    th.start()
    poll_for(
        lambda: glob.glob(os.path.join(ledger, "cleaning-*")), 20, 0.02, "old workers stopping"
    )
    ha.kill_nimbus(0)
    open(os.path.join(ledger, "gate"), "w").close()
    th.join(30)
    assert errors, "the rebalance was answered: the kill did not land inside it"
    assert ha.wait_leader(not_=0, timeout=FAILOVER + 10) == 1
    finish(ha, watch, 1, "rb", ledger)
    (row,) = [r for r in ha.call(1, "list") if r["name"] == "rb"]
    assert row["workers"] == 1


def test_zookeeper_down_for_10s_the_workers_run_on_and_the_cluster_recovers(ha, watch, ledger, zk):
    start(ha, watch, "zkdown", ledger, count=IDS * 2)
    pids = {p.pid for p in ha.workers()}
    zk.stop()
    t0 = time.monotonic()
    poll_for(lambda: "not leading" in ha.log("n0.log"), 20, 0.05, "the leader stops acting")
    watch.figures["stopped_acting_s"] = round(time.monotonic() - t0, 2)
    before = deliveries(ledger)
    # the outage lasts 10 s (the test's input, not a synchronisation); the workers work on
    poll_for(lambda: time.monotonic() - t0 >= 10, 15, 0.2, "10 s of outage")
    watch.figures["delivered_while_down"] = deliveries(ledger) - before
    assert watch.figures["delivered_while_down"] > 0
    assert {p.pid for p in ha.workers()} == pids
    zk.start()
    t1 = time.monotonic()
    leader = ha.wait_leader(timeout=FAILOVER + 20)
    watch.figures["recovered_s"] = round(time.monotonic() - t1, 2)
    finish(ha, watch, leader, "zkdown", ledger, count=IDS * 2)


def _logged_at(log: str, what: str) -> str:
    """The time stamp (same day: HH:MM:SS.mmm sorts) of the first line saying `what`."""
    line = next(ln for ln in log.splitlines() if what in ln)
    return line.split()[1]


def test_a_partitioned_leader_stops_acting_before_another_leads(tmp_path, zk, watch, ledger):
    """n0 reaches ZooKeeper through a proxy the test cuts: a partition (n0 runs on, its
    packets go nowhere). n0 must stop acting before its session can expire, so before
    n1 is elected; once the partition heals, it follows n1. ZooKeeper's record of
    assignments, in its order: n0's records (its term), then n1's (a later term), and
    none of n0's after. (Without the lease, n0 stays leader while its client is merely
    disconnected: it says it leads while n1 does.)"""
    from zk_server import Partition

    proxy = Partition(zk.port)
    ha = HaCluster(str(tmp_path), zk.hosts, failover=FAILOVER, zk_for={0: proxy.hosts})
    try:
        watch.sample()
        start(ha, watch, "part", ledger)
        for sub in ("b", "c"):
            os.makedirs(os.path.join(ledger, sub))
        proxy.cut()
        t0 = time.monotonic()
        assert ha.wait_leader(not_=0, timeout=FAILOVER + 10) == 1
        watch.figures["new_leader_s"] = round(time.monotonic() - t0, 2)
        assert ha.call(0, "leader")["leading"] is False  # n0 runs, and does not lead
        stopped = _logged_at(ha.log("n0.log"), "not leading")
        elected = _logged_at(ha.log("n1.log"), "elected leader")
        watch.figures["n0_stopped_at"], watch.figures["n1_elected_at"] = stopped, elected
        assert stopped < elected, (stopped, elected)
        ha.call(1, "submit", (pipeline("after", os.path.join(ledger, "b"), 500, 0.0), {}))
        proxy.heal()
        poll_for(lambda: (ha.call(0, "leader")["leader"] or {}).get("id") == "n1", 30, 0.1,
                 "n0 names n1 the leader (a new session, the election rejoined)")  # fmt: skip
        ha.call(0, "submit", (pipeline("later", os.path.join(ledger, "c"), 500, 0.0), {}))
        finish(ha, watch, 1, "part", ledger)
        records = ha.assignments()
        owners = [(r["nimbus"], r["term"]) for r in records]
        first_n1 = next(i for i, (who, _) in enumerate(owners) if who == "n1")
        assert all(who == "n0" for who, _ in owners[:first_n1]), owners
        assert all(who == "n1" for who, _ in owners[first_n1:]), owners  # n0 never again
        assert owners[0][1] < owners[first_n1][1]  # n1's term is later
        assert {r["topology"] for r in records[first_n1:]} >= {"after", "later"}
    except BaseException:
        for name in ha.logs():
            print(f"--- {name}\n{ha.log(name)[-4000:]}")
        raise
    finally:
        ha.close()
        proxy.close()


def test_a_single_nimbus_restarted_after_a_rebalance_keeps_the_new_worker_count(
    cluster, watch, ledger
):
    """The data-dir nimbus (no ZooKeeper): it restored a rebalanced topology with the
    worker count it was submitted with, not the one it was rebalanced to."""
    c = cluster
    poll_for(lambda: len(c.call("supervisors")) == 2, 30, 0.1, "two supervisors")
    c.call("submit", (pipeline("rb1", ledger, IDS, WORK, **CONF), {}))
    c.wait_status("rb1", "running")
    poll_for(lambda: deliveries(ledger) >= IDS // 5, 60, 0.05, "the run under way")
    watch.begin()
    c.call("rebalance", ("rb1", 1, 0))
    c.wait_status("rb1", "running")
    c.nimbus.send_signal(signal.SIGKILL)
    c.nimbus.wait(10)
    c.start_nimbus()
    c.wait_status("rb1", "complete", timeout=150)
    (row,) = [r for r in c.call("list") if r["name"] == "rb1"]
    assert row["workers"] == 1 and len(row["slots"]) <= 1, row
    watch.freeze()
    a = audit(ledger, IDS)
    assert a.lost == 0 and a.acked == IDS, a
