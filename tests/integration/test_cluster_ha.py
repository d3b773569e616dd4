"""Several nimbus on a real ZooKeeper (started by the test session: tests/zk_server.py):
election, a follower forwarding, the state store, a clean hand-over. The kill -9 and
outage cases are in tests/faults/test_nimbus_ha.py."""

from __future__ import annotations

import signal

import pytest

from stormish import BasicBolt, Spout, Topology
from stormish.errors import StormishError
from stormish.testing import poll_for

from .ha_cluster import HaCluster
from .harness import no_process_left
from .parts import Count, Split
from .test_cluster import SENTENCES, wordcount

FEW = SENTENCES[:300]


def small_wordcount(name: str) -> Topology:
    from stormish.testing import ListSpout

    t = Topology(name, config={"topology.workers": 2})
    t.set_spout("s", ListSpout([[s] for s in FEW], fields=["sentence"]))
    t.set_bolt("split", Split(), parallelism=2).shuffle_grouping("s")
    t.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
    return t


pytestmark = pytest.mark.timeout(120)


def test_one_nimbus_leads_and_a_follower_forwards_reads_and_writes(ha):
    assert ha.leader() == 0
    who = ha.call(1, "leader")
    assert who["leading"] is False and who["leader"]["id"] == "n0"
    assert who["leader"]["api"] == f"tcp://127.0.0.1:{ha.apis[0]}"
    # submitted to the follower, run by the leader, read back through either
    assert ha.call(1, "submit", (small_wordcount("wc"), {})) == "wc"
    ha.wait_status(1, "wc", "complete")
    stats = ha.call(1, "stats", "wc")
    assert stats.components["count"].executed == sum(len(s.split()) for s in FEW)
    assert stats.components["s"].acked == len(FEW)
    assert ha.status(0, "wc") == "complete"
    # the supervisors were told where the leader is by whichever nimbus they reached
    assert "supervisor s0 joined" in ha.log("n0.log")
    assert "supervisor s0 joined" not in ha.log("n1.log")
    assert "forwarding" not in ha.log("n0.log")
    # the command line, given a dead nimbus first: the next one answers (and forwards)
    import json
    import subprocess
    import sys

    from .test_cluster import free_ports

    (dead,) = free_ports(1)
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "list", "--json", "--connect-timeout", "0.5",
         "--nimbus", f"127.0.0.1:{dead},127.0.0.1:{ha.apis[1]}", "--keys", ha.keys],
        env=ha.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"nimbus 127.0.0.1:{dead}:" in out.stderr and "trying" in out.stderr
    assert [r["name"] for r in json.loads(out.stdout)["topologies"]] == ["wc"]


def test_a_keyed_clusters_znodes_are_closed_to_a_client_without_its_keys(ha):
    """Digest ACLs derived from the cluster's keys: no reading its code, no planting a
    topology for nimbus to unpickle."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    zk = KazooClient(hosts=ha.zk_hosts)
    zk.start(10)
    try:
        with pytest.raises(NoAuthError):
            zk.get_children(f"{ha.root}/topologies")
        with pytest.raises(NoAuthError):
            zk.create(f"{ha.root}/topologies/planted", b"{}")
    finally:
        zk.stop()
        zk.close()
    assert ha.assignments() == []  # with the keys' credential it reads (nothing yet)


class Gated(Spout):
    """Emits `count` numbers reliably, the second half only once the file `gate` exists:
    the topology is surely running while the test changes leaders."""

    outputs = ["n"]

    def __init__(self, count: int, gate: str):
        self.count, self.gate = count, gate

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        import os

        if self.n >= self.count:
            self.finish()
        elif self.n < self.count // 2 or os.path.exists(self.gate):
            self.n += 1
            self.emit([self.n], msg_id=self.n)


class Null(BasicBolt):
    def execute(self, tup):
        pass


def run_gated(ha: HaCluster, gate: str, timeout: float) -> None:
    """Submits the gated topology (2,000 numbers, the second half once `gate` exists) to
    the first nimbus and waits until the first half is acked."""
    t = Topology("gated", config={"topology.workers": 2})
    t.set_spout("s", Gated(2000, gate))
    t.set_bolt("b", Null(), parallelism=2).shuffle_grouping("s")
    ha.call(0, "submit", (t, {}))
    ha.wait_status(0, "gated", "running")
    poll_for(lambda: ha.call(0, "stats", "gated").components["s"].acked == 1000, timeout,
             0.05, "the first half acked")  # fmt: skip


def test_a_leader_stopped_cleanly_hands_over_at_once_and_the_topology_runs_on(ha, tmp_path):
    gate = str(tmp_path / "gate")
    run_gated(ha, gate, 20)
    ha.kill_nimbus(0, signal.SIGTERM)  # its election znode goes with its session
    assert ha.wait_leader(not_=0, timeout=10) == 1
    poll_for(lambda: all(f"gated: worker {i} adopted" in ha.log("n1.log") for i in (0, 1)),
             20, 0.05, "both workers adopted")  # fmt: skip
    open(gate, "w").close()
    ha.wait_status(1, "gated", "complete", timeout=30)
    assert ha.call(1, "stats", "gated").components["s"].acked == 2000
    log = ha.log("n1.log")
    assert "elected leader" in log and "leading: 1 topologies restored" in log
    assert "restarted" not in log  # adopted where they ran: nothing restarted
    # every assignment in ZooKeeper's record: n0's, then n1's, never interleaved
    who = [a["nimbus"] for a in ha.assignments()]
    assert who[0] == "n0" and who == sorted(who)


def test_the_state_store_keeps_a_topology_whole_and_refuses_a_nimbus_that_does_not_lead(
    tmp_path, zookeeper_server
):
    """ZkStore against ZooKeeper: written only on change, fenced by the election znode,
    code held by the nimbus that wrote it, the leader's record of assignments."""
    from kazoo.client import KazooClient

    from stormish.cluster.zkstate import LostLeadership, ZkStore

    zk = KazooClient(hosts=zookeeper_server.hosts)
    zk.start(10)
    try:
        root = f"/store-test-{tmp_path.name}"
        node = zk.create(f"{root}/leader/n-", b"{}", ephemeral=True, sequence=True, makepath=True)
        fence: list = [(node, 7)]
        store = ZkStore(zk, root, "n0", str(tmp_path / "d0"), lambda: fence[0], min_replicas=1)
        topo = wordcount("wc")
        store.save_topology("wc", topo, {"topology.workers": 2})
        state = {"status": "running", "slots": {"0": ["s0", 6700]}, "epoch": 1}
        store.save_state("wc", state)
        version = zk.exists(f"{root}/topologies/wc").version
        store.save_state("wc", state)  # the same: not written
        assert zk.exists(f"{root}/topologies/wc").version == version
        assert zk.get_children(f"{root}/code/{zk.get_children(f'{root}/code')[0]}/holders") == [
            "n0"
        ]
        # another nimbus (a fresh store) reads it back whole
        other = ZkStore(zk, root, "n1", str(tmp_path / "d1"), lambda: (None, None))
        ((name, topology, conf, got),) = other.load_all()
        assert (name, topology.name, conf["topology.workers"]) == ("wc", "wc", 2)
        assert got["slots"] == {"0": ["s0", 6700]} and "code" not in got
        with pytest.raises(LostLeadership):  # it does not lead
            other.save_state("wc", dict(state, status="killed"))
        # the leader's znode gone (its session expired): its own writes are refused too
        zk.delete(node)
        with pytest.raises(LostLeadership):
            store.save_state("wc", dict(state, slots={}))
        assert [(a["nimbus"], a["term"]) for a in store.assignments()] == [("n0", 7)]
    finally:
        zk.stop()
        zk.close()


def test_a_submit_waits_for_its_code_on_enough_nimbus_and_else_is_refused_whole(
    tmp_path, zookeeper_server
):
    from kazoo.client import KazooClient

    from stormish.cluster.zkstate import ZkStore

    zk = KazooClient(hosts=zookeeper_server.hosts)
    zk.start(10)
    try:
        root = f"/repl-test-{tmp_path.name}"
        node = zk.create(f"{root}/leader/n-", b"{}", ephemeral=True, sequence=True, makepath=True)
        leader = ZkStore(zk, root, "n0", str(tmp_path / "d0"), lambda: (node, 1), 2, 0.5)
        with pytest.raises(StormishError, match="topology.min.replication.count"):
            leader.save_topology("wc", wordcount("wc"), {})
        assert zk.get_children(f"{root}/topologies") == []  # nothing of it is submitted
        # a second nimbus fetches the code as it appears: the submit then goes through
        ZkStore(zk, root, "n1", str(tmp_path / "d1"), lambda: (None, None))
        leader.save_topology("wc2", wordcount("wc2"), {})
        assert (tmp_path / "d1" / "blobs").exists()
        assert len(list((tmp_path / "d1" / "blobs").iterdir())) >= 1
    finally:
        zk.stop()
        zk.close()


def test_a_followers_metrics_are_the_leaders(zookeeper_server, tmp_path):
    """Prometheus may scrape either nimbus: a follower runs no topology and holds none, so
    its /metrics asks the leader (the compose cluster's published metrics port is one
    nimbus's, and which one leads is the election's choice: its docker test failed when
    the other won). `stormish_nimbus_leader` says which one leads."""
    from .test_metrics import scrape, series

    with no_process_left():
        ha = HaCluster(str(tmp_path), zookeeper_server.hosts, nimbus_args=("--metrics-port", "0"))
        try:

            def metrics_url(i: int) -> str | None:
                for word in ha.log(f"n{i}.log").split():
                    if word.startswith("http://") and word.endswith("/metrics"):
                        return word.replace("0.0.0.0", "127.0.0.1")
                return None

            urls = [
                poll_for(lambda i=i: metrics_url(i), 30, 0.05, f"n{i}'s metrics") for i in (0, 1)
            ]
            run_gated(ha, str(tmp_path / "gate"), 30)

            def both_tasks(url: str) -> dict:
                got = series(
                    scrape(url), "stormish_executed_total", topology="gated", component="b"
                )
                return got if len(got) == 2 else {}

            led, follows = (poll_for(lambda u=u: both_tasks(u), 30, 0.2, u) for u in urls)
            assert sum(led.values()) == sum(follows.values()) == 1000
            assert series(scrape(urls[0]), "stormish_nimbus_leader") == {(): 1.0}
            assert series(scrape(urls[1]), "stormish_nimbus_leader") == {(): 0.0}
            f = scrape(urls[1])
            assert series(f, "stormish_supervisors") == {(): 2.0}
            assert series(f, "stormish_topology_status", topology="gated", status="running")
        finally:
            ha.close()
