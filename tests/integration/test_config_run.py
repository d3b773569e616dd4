"""Config on real worker processes: application keys reach
open()/prepare() on every worker, a component's own receive buffer is the one its tasks
get, `stormish.local.host` is where the links bind, `topology.debug` logs in workers."""

from __future__ import annotations

import pytest

from stormish import Bolt, ConfigError, LocalCluster, Spout, Topology
from stormish.testing import ListSpout, run_topology

pytestmark = pytest.mark.usefixtures("no_leaks")  # no process or socket left (conftest)


QUEUE = "topology.executor.receive.buffer.size"


class ConfSpout(Spout):
    """Emits the application keys it was opened with, then finishes (TestConfBolt)."""

    outputs = ["key", "value"]

    def open(self, conf, context):
        self.rows = [(k, conf.get(k)) for k in ("fake.config", "app.nested", "app.comp")]

    def next_tuple(self):
        if self.rows:
            self.emit(list(self.rows.pop()))
        else:
            self.finish()


class ConfBolt(Bolt):
    """Remembers the keys it was prepared with, and where it ran."""

    component_config = {"app.class": "from the class"}

    def prepare(self, conf, context):
        keys = ("fake.config", "app.nested", "app.comp", "app.class")
        self.seen = {k: conf.get(k) for k in keys}
        self.seen["worker"] = context.worker_index
        self.seen["batch"] = conf["topology.producer.batch.size"]
        self.got = []

    def execute(self, tup):
        self.got.append(tuple(tup.values))
        self.ack(tup)

    def result(self):
        return {**self.seen, "got": self.got}


NESTED = {"hosts": ["a", "b"], "limits": (1, 2.5), "on": True}


def conf_topology(name="conf", spout_config=None):
    t = Topology(name, config={"fake.config": 123, "app.nested": NESTED})
    spout = t.set_spout("s", ConfSpout()).add_configuration("app.comp", "spout's")
    for k, v in (spout_config or {}).items():
        spout.add_configuration(k, v)
    small = t.set_bolt("small", ConfBolt(), parallelism=2).shuffle_grouping("s")
    small.add_configuration("app.comp", "bolt's").add_configuration(QUEUE, 64)
    t.set_bolt("big", ConfBolt(), parallelism=2).all_grouping("s")
    return t


def test_application_keys_reach_open_and_prepare_on_two_workers():
    res = run_topology(conf_topology(), workers=2, timeout=90)
    small, big = res.results["small"], res.results["big"]
    assert {r["worker"] for r in small} == {0, 1} and {r["worker"] for r in big} == {0, 1}
    for r in small + big:
        assert r["fake.config"] == 123
        assert r["app.nested"] == NESTED  # survived the pickle to the worker process
        assert r["app.class"] == "from the class"
    assert {r["app.comp"] for r in small} == {"bolt's"}  # component level wins
    assert {r["app.comp"] for r in big} == {None}
    for part in big:  # all_grouping: every task got what the spout was opened with
        assert sorted(part["got"], key=repr) == sorted(
            [("fake.config", 123), ("app.nested", NESTED), ("app.comp", "spout's")], key=repr
        )


def test_a_component_s_receive_buffer_is_honoured_on_two_workers():
    res = run_topology(conf_topology("queues"), workers=2, timeout=90)
    tasks = res.stats.tasks.values()
    small = [t for t in tasks if t.component == "small"]
    assert len(small) == 2 and {t.worker for t in small} == {0, 1}
    assert {t.receive_capacity for t in small} == {64}
    assert {t.receive_capacity for t in tasks if t.component != "small"} == {4096}
    assert {r["batch"] for r in res.results["small"]} == {32}  # follows its own queue
    assert {r["batch"] for r in res.results["big"]} == {512}


def test_storm_s_receive_buffer_of_64_runs_on_two_workers():
    t = Topology("q64", config={QUEUE: 64})
    t.set_spout("s", ListSpout([[i] for i in range(500)], fields=["n"]))
    t.set_bolt("b", ConfBolt(), parallelism=2).shuffle_grouping("s")
    res = run_topology(t, workers=2, timeout=90)
    assert sum(len(r["got"]) for r in res.results["b"]) == 500
    assert {t.receive_capacity for t in res.stats.tasks.values()} == {64}


def test_local_workers_bind_their_links_on_stormish_local_host():
    t = conf_topology("host")
    with LocalCluster(workers=2, config={"stormish.local.host": "127.0.0.2"}) as c:
        c.submit(t)
        book = c._get("host").group.book()
        c.wait_complete("host", timeout=90)
    assert sorted(book) == [0, 1]
    assert all(addr.startswith("tcp://127.0.0.2:") for addr in book.values()), book


def test_a_non_loopback_local_host_without_keys_is_refused_naming_the_key(monkeypatch):
    monkeypatch.delenv("STORMISH_KEYS", raising=False)
    with (
        LocalCluster(workers=2, config={"stormish.local.host": "10.1.2.3"}) as c,
        pytest.raises(ConfigError, match=r"'stormish\.local\.host' \('10\.1\.2\.3'\).*loopback"),
    ):
        c.submit(conf_topology("far"))


def test_topology_debug_logs_emits_in_worker_processes(capfd):
    run_topology(conf_topology("debug", {"topology.debug": True}), workers=2, timeout=90)
    err = capfd.readouterr().err
    # task ids: components in name order, __acker 1-2 (one per worker), big 3-4, s 5
    assert "s[5] emit ['fake.config', 123]" in err, err[-2000:]
    assert "s[5] emit ['app.comp', \"spout's\"]" in err
    assert "small[" not in err and "big[" not in err  # only the spout turned it on


def test_with_curve_keys_local_workers_may_bind_any_address(monkeypatch, tmp_path):
    """'loopback unless CURVE keys are configured': with STORMISH_KEYS set the worker
    processes secure every socket (the control channel too) and may listen on 0.0.0.0."""
    from stormish.transport.keys import create

    create(str(tmp_path / "keys"), False)
    monkeypatch.setenv("STORMISH_KEYS", str(tmp_path / "keys"))
    with LocalCluster(workers=2, config={"stormish.local.host": "0.0.0.0"}) as c:
        c.submit(conf_topology("curve"))
        book = c._get("curve").group.book()
        stats = c.wait_complete("curve", timeout=90)
    assert stats.status == "complete"
    assert all(addr.startswith("tcp://0.0.0.0:") for addr in book.values()), book
