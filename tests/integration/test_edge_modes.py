"""Channel modes beyond overflow policies on a running topology, on 1 worker and across 2
: barrier edges deliver n tuples at once as one batch, in order, and the
remainder of a finite input leaves as a last short batch; latched edges give a restarted
worker's tasks the last tuple once, without the spout replaying it; previous_tick edges
make what was published visible one epoch later; multi-reader edges give each reader
every retained tuple once."""

from __future__ import annotations

import os
import signal
import time

import pytest

from stormish import BasicBolt, Bolt, LocalCluster, Spout, Topology
from stormish.testing import FakeClock, FeederSpout, advance_time, poll_for


class Count(Spout):
    """0..n-1, `per_call` a call, reliable (msg id = the number) with `reliable`."""

    outputs = ["n"]

    def __init__(self, n: int, per_call: int = 7, reliable: bool = False):
        self.total, self.per_call, self.reliable = n, per_call, reliable

    def open(self, conf, context):
        self.n = 0
        self.acked = 0
        self.failed: list = []

    def next_tuple(self):
        if self.n >= self.total:
            self.finish_input()  # only replays may follow: a barrier's remainder may leave
            if not self.reliable or self.acked + len(self.failed) == self.total:
                self.finish()
            return
        for _ in range(min(self.per_call, self.total - self.n)):
            self.emit((self.n,), msg_id=self.n if self.reliable else None)
            self.n += 1

    def ack(self, msg_id):
        self.acked += 1

    def fail(self, msg_id, failure):
        self.failed.append((msg_id, failure.reason))

    def result(self):
        return {"acked": self.acked, "failed": self.failed}


class Batches(BasicBolt):
    """Records every batch it is given (its rows' numbers)."""

    def prepare(self, conf, context):
        self.batches: list[list[int]] = []

    def execute_batch(self, batch):
        self.batches.append([v[0] for v in batch.values])

    def execute(self, tup):  # never called: execute_batch is defined
        raise AssertionError("a barrier edge delivers batches")

    def result(self):
        return self.batches


class Settle(Bolt):
    """A batch-settle bolt (batch_size): a barrier edge's batch is not cut again."""

    batch_size = 2

    def prepare(self, conf, context):
        self.batches: list[list[int]] = []

    def execute_batch(self, batch):
        self.batches.append([v[0] for v in batch.values])

    def result(self):
        return self.batches


def run(topology: Topology, timeout: float = 60):
    with LocalCluster() as cluster:
        cluster.submit(topology)
        stats = cluster.wait_complete(topology.name, timeout=timeout)
        return stats, cluster._get(topology.name).results()


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("reliable", [False, True])
def test_a_barrier_delivers_n_at_once_in_order_and_the_remainder_at_the_end(workers, reliable):
    conf = {"topology.workers": workers}
    if not reliable:
        conf["topology.acker.executors"] = 0
    t = Topology("barrier", config=conf)
    t.set_spout("src", Count(1003, reliable=reliable))
    t.set_bolt("b", Batches()).shuffle_grouping("src", mode="barrier", capacity=10)
    stats, results = run(t)
    (batches,) = results["b"]
    assert [len(b) for b in batches] == [10] * 100 + [3]  # whole batches, then the rest
    assert [x for b in batches for x in b] == list(range(1003))  # in order
    edge = stats.components["b"].edges["src:default"]
    assert edge["arrived"] == edge["executed"] == 1003 and edge["queued"] == 0
    assert edge["policy"]["mode"] == "barrier" and edge["policy"]["capacity"] == 10
    from stormish.runtime.stats import edge_table

    (line,) = [x for x in edge_table(stats) if x.startswith("b <- src:default")]
    assert line.split()[3:5] == ["barrier", "1,003"]  # the closing table names the mode
    if reliable:
        (spout,) = results["src"]
        assert spout == {"acked": 1003, "failed": []}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_barrier_gathers_several_upstream_tasks_and_a_settle_bolt_gets_it_whole(workers):
    t = Topology("barrier2", config={"topology.workers": workers})
    t.set_spout("src", Count(600, per_call=5, reliable=True), parallelism=2)
    t.set_bolt("b", Settle()).shuffle_grouping("src", mode="barrier", capacity=64)
    stats, results = run(t)
    (batches,) = results["b"]
    assert [len(b) for b in batches] == [64] * 18 + [1200 - 64 * 18]
    rows = [x for b in batches for x in b]
    assert sorted(rows) == sorted(list(range(600)) * 2)
    for task_rows in _per_upstream(rows):  # each upstream task's order holds
        assert task_rows == sorted(task_rows)
    assert sum(s["acked"] for s in results["src"]) == 1200
    assert stats.components["b"].acked == 1200


def _per_upstream(rows: list[int]) -> list[list[int]]:
    """Both spout tasks emit 0..599: split the interleaving into two increasing runs
    (a row goes to the first run whose last is smaller; it exists iff each is ordered)."""
    runs: list[list[int]] = [[], []]
    for x in rows:
        for r in runs:
            if not r or r[-1] < x:
                r.append(x)
                break
        else:
            raise AssertionError(f"{x} fits no upstream task's order")
    return runs


class Settings(Spout):
    """Configuration, latched: `v1`, then `v2`, then nothing until the file `go` exists
    (the test's word that it is done restarting workers), then it finishes."""

    outputs = ["setting"]

    def __init__(self, go: str):
        self.go = go

    def open(self, conf, context):
        self.sent = 0

    def next_tuple(self):
        if self.sent < 2:
            self.sent += 1
            self.emit((f"v{self.sent}",))
        elif os.path.exists(self.go):
            self.finish()


class Apply(BasicBolt):
    """Records the settings it was given."""

    def prepare(self, conf, context):
        self.seen: list[str] = []

    def execute(self, tup):
        self.seen.append(tup.values[0])

    def result(self):
        return self.seen


def latched_topology(name: str, workers: int, go: str, parallelism: int) -> Topology:
    t = Topology(name, config={"topology.workers": workers, "topology.acker.executors": 0})
    t.set_spout("a_settings", Settings(go))
    t.set_bolt("b_apply", Apply(), parallelism=parallelism).all_grouping(
        "a_settings", mode="latched"
    )
    return t


@pytest.mark.parametrize("workers", [1, 2])
def test_a_latched_edge_delivers_every_tuple_to_every_task_once(workers, tmp_path):
    go = tmp_path / "go"
    go.touch()
    stats, results = run(latched_topology("latched", workers, str(go), 3))
    assert results["b_apply"] == [["v1", "v2"]] * 3
    edge = stats.components["b_apply"].edges["a_settings:default"]
    assert edge["arrived"] == edge["executed"] == 6 and edge["policy"]["mode"] == "latched"


@pytest.mark.timeout(90)
def test_a_restarted_worker_gets_the_latched_tuple_once_without_the_spout_replaying(tmp_path):
    """The worker of one of the bolt's two tasks is killed (-9) and started again: its
    task gets the last setting, `v2`, once, from the sender's link (the spout emitted it
    once, long before); the task beside the spout, which never restarted, is not sent
    anything twice."""
    go = tmp_path / "go"
    t = latched_topology("latched-restart", 2, str(go), 2)
    with LocalCluster() as cluster:
        cluster.submit(t)
        running = cluster._get(t.name)
        tasks = cluster.statistics(t.name).tasks
        spout = next(s.worker for s in tasks.values() if s.component == "a_settings")
        bolts = {n: s.worker for n, s in tasks.items() if s.component == "b_apply"}
        (far,) = {w for w in bolts.values() if w != spout}  # one task in each worker

        def executed() -> int:
            return cluster.statistics(t.name).components["b_apply"].executed

        poll_for(lambda: executed() == 4, 30, 0.02, "both settings applied by both tasks")
        handle = running.group.handles[far]
        os.kill(handle.proc.pid, signal.SIGKILL)
        handle.proc.wait(10)
        running.restart_worker(far)
        poll_for(lambda: executed() == 3, 30, 0.02, "the last setting applied after restart")
        go.touch()
        stats = cluster.wait_complete(t.name, timeout=30)
        results = running.results()
    got = dict(zip(sorted(bolts), results["b_apply"], strict=True))
    assert got == {n: ["v2"] if w == far else ["v1", "v2"] for n, w in bolts.items()}
    edge = stats.components["b_apply"].edges["a_settings:default"]
    assert edge["arrived"] == edge["executed"] == 3


class Inc(Bolt):
    """A cycle of one: n comes back as n + 1 on `loop` (a previous_tick edge) up to 5;
    records each n with the topology clock's time when it ran."""

    streams = {"default": ["n"], "loop": ["n"]}

    def prepare(self, conf, context):
        self.clock = context.clock
        self.seen: list[tuple[int, float]] = []

    def execute(self, tup):
        n = tup.values[0]
        self.seen.append((n, self.clock.now()))
        if n < 5:
            self.emit((n + 1,), stream="loop", anchors=[tup])
        self.ack(tup)

    def result(self):
        return self.seen


@pytest.mark.timeout(60)
def test_a_previous_tick_feedback_edge_delays_a_cycle_by_one_epoch_deterministically():
    """topology.epoch.millis on a FakeClock: each step of the cycle is visible one epoch
    after it was emitted, so step n runs at exactly n epochs (without the delay, all six
    would run at once)."""
    with FeederSpout(["n"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t = Topology("epochs", config={"topology.epoch.millis": 1000})
        t.set_spout("seed", feeder)
        inc = t.set_bolt("inc", Inc())
        inc.shuffle_grouping("seed")
        inc.shuffle_grouping("inc", "loop", mode="previous_tick")
        cluster.submit(t)
        t0 = cluster.clock.now()
        feeder.feed([0], msg_id="seed")
        for _ in range(6):
            advance_time(cluster, 1.0)
        poll_for(lambda: feeder.is_acked("seed"), 10, 0.01, "the cycle's tree complete")
        running = cluster._get("epochs")
        edge = cluster.statistics("epochs").components["inc"].edges["inc:loop"]
        cluster.kill("epochs")
        (seen,) = running.results()["inc"]
    assert [(n, round(at - t0, 6)) for n, at in seen] == [(n, float(n)) for n in range(6)]
    assert edge["arrived"] == edge["executed"] == 5 and edge["policy"]["mode"] == "previous_tick"


class Staged(Spout):
    """Five tuples on a previous_tick edge; once the file `go` exists it advances the
    epoch (what it emitted becomes visible, in every worker); once `end` exists it
    finishes."""

    outputs = ["n"]

    def __init__(self, go: str, end: str):
        self.go, self.end = go, end

    def open(self, conf, context):
        self.n = 0
        self.advanced = False

    def next_tuple(self):
        if self.n < 5:
            self.emit((self.n,))
            self.n += 1
        elif not self.advanced and os.path.exists(self.go):
            self.advance_epoch()
            self.advanced = True
        elif self.advanced and os.path.exists(self.end):
            self.finish()


class SawGo(BasicBolt):
    """Records each n and whether `go` existed when it ran."""

    def __init__(self, go: str):
        self.go = go

    def prepare(self, conf, context):
        self.seen: list[tuple[int, bool]] = []

    def execute(self, tup):
        self.seen.append((tup.values[0], os.path.exists(self.go)))

    def result(self):
        return self.seen


@pytest.mark.parametrize("workers", [1, 2])
def test_a_spouts_advance_epoch_makes_staged_tuples_visible_in_every_worker(workers, tmp_path):
    go, end = str(tmp_path / "go"), str(tmp_path / "end")
    t = Topology("staged", config={"topology.workers": workers, "topology.acker.executors": 0})
    t.set_spout("a_spout", Staged(go, end))
    t.set_bolt("b_bolt", SawGo(go)).shuffle_grouping("a_spout", mode="previous_tick")
    with LocalCluster() as cluster:
        cluster.submit(t)

        def edge():
            return cluster.statistics(t.name).components["b_bolt"].edges["a_spout:default"]

        poll_for(lambda: edge()["arrived"] == 5, 30, 0.01, "five tuples staged")
        assert edge()["executed"] == 0 and edge()["queued"] == 5
        open(go, "w").close()
        # visible by the spout's advance (its worker's link tells the other), not by the
        # end of the input: the spout has not finished
        poll_for(lambda: edge()["executed"] == 5, 30, 0.01, "five tuples executed")
        open(end, "w").close()
        cluster.wait_complete(t.name, timeout=30)
        (seen,) = cluster._get(t.name).results()["b_bolt"]
    assert seen == [(n, True) for n in range(5)]


class Reader(Bolt):
    """Reads every tuple it is given; task index 0 is slow (simulated work per tuple)."""

    def prepare(self, conf, context):
        self.slow = context.task_index == 0
        self.seen: list[int] = []

    def execute(self, tup):
        if self.slow:
            time.sleep(0.0005)
        self.seen.append(tup.values[0])
        self.ack(tup)

    def result(self):
        return self.seen


@pytest.mark.parametrize("workers", [1, 2])
def test_multi_readers_each_read_the_retained_tuples_once_and_a_slow_one_misses_some(workers):
    n = 3000
    conf = {"topology.workers": workers, "topology.acker.executors": 0}
    t = Topology("readers", config=conf)
    t.set_spout("src", Count(n, per_call=100))
    t.set_bolt("read", Reader(), parallelism=2).all_grouping(
        "src", readers="multi", overflow="drop_oldest", capacity=100
    )
    stats, results = run(t)
    slow, fast = results["read"]  # task index order
    for seen in (slow, fast):
        assert seen == sorted(set(seen))  # each retained tuple once, in order
        assert seen[-1] == n - 1  # the newest is never the one evicted
    assert len(slow) < n  # the slow reader missed what was evicted before it read it
    for s in stats.tasks.values():
        if s.component == "read":
            e = s.edges["src:default"]
            assert e["arrived"] == n == e["executed"] + e["dropped"] and e["queued"] == 0
            assert e["policy"]["readers"] == "multi"
    edge = stats.components["read"].edges["src:default"]
    assert edge["executed"] == len(slow) + len(fast)


def test_the_plan_reports_slow_reader_drop_risk(tmp_path):
    from stormish.lint import analyse

    t = Topology("plan")
    t.set_spout("src", Count(1))
    t.set_bolt("ring", Reader(), parallelism=3).all_grouping(
        "src", readers="multi", overflow="latest"
    )
    t.set_bolt("wall", Reader(), parallelism=3).all_grouping("src", readers="multi")
    report = analyse(t, {"topology.workers": 2})
    by = {e["name"]: e for e in report.as_dict()["edges"]}
    assert by["ring <- src:default"]["slow_reader_drop_risk"] is True
    assert by["wall <- src:default"]["slow_reader_drop_risk"] is False
    risky = [f.where for f in report.findings if f.message.startswith("slow_reader_drop_risk")]
    assert risky == ["ring <- src:default"]


class Wait(Spout):
    """Five tuples, then nothing until the file `end` exists; then it finishes."""

    outputs = ["n"]

    def __init__(self, end: str):
        self.end = end

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n < 5:
            self.emit((self.n,))
            self.n += 1
        elif os.path.exists(self.end):
            self.finish()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_epoch_timer_makes_staged_tuples_visible_in_each_worker(workers, tmp_path):
    """topology.epoch.millis on the wall clock: no spout advances the epoch and the input
    has not ended, yet the staged tuples are executed (each worker's own timer)."""
    end = str(tmp_path / "end")
    conf = {
        "topology.workers": workers,
        "topology.acker.executors": 0,
        "topology.epoch.millis": 50,
    }
    t = Topology("timer", config=conf)
    t.set_spout("a_spout", Wait(end))
    t.set_bolt("b_bolt", SawGo(end)).shuffle_grouping("a_spout", mode="previous_tick")
    with LocalCluster() as cluster:
        cluster.submit(t)

        def executed() -> int:
            return cluster.statistics(t.name).components["b_bolt"].executed

        poll_for(lambda: executed() == 5, 30, 0.01, "five tuples executed")
        open(end, "w").close()
        cluster.wait_complete(t.name, timeout=30)
        (seen,) = cluster._get(t.name).results()["b_bolt"]
    assert seen == [(n, False) for n in range(5)]  # all before the input ended


class Record(BasicBolt):
    """Records every value; `per_tuple` seconds of simulated work each."""

    def __init__(self, per_tuple: float = 0.0):
        self.per_tuple = per_tuple

    def prepare(self, conf, context):
        self.seen: list = []

    def execute(self, tup):
        if self.per_tuple:
            time.sleep(self.per_tuple)
        self.seen.append(tup.values[0])

    def result(self):
        return self.seen


class Reliable(Spout):
    """0..n-1 reliably, `per_call` a call (or as emit_many rows of `per_call` when
    `many`: one tree per call, msg id = its first number); records every failure."""

    outputs = ["n"]

    def __init__(self, n: int, per_call: int, many: bool = False):
        self.total, self.per_call, self.many = n, per_call, many

    def open(self, conf, context):
        self.n = 0
        self.done = 0
        self.failures: dict = {}

    def next_tuple(self):
        if self.n >= self.total:
            self.finish_input()
            if self.done == self.total:
                self.finish()
            return
        k = min(self.per_call, self.total - self.n)
        if self.many:
            self.emit_many([(self.n + i,) for i in range(k)], msg_id=self.n)
        else:
            for i in range(k):
                self.emit((self.n + i,), msg_id=self.n + i)
        self.n += k

    def ack(self, msg_id):
        self.done += self.per_call if self.many else 1

    def fail(self, msg_id, failure):
        self.done += self.per_call if self.many else 1
        self.failures[msg_id] = (failure.reason, failure.component)

    def result(self):
        return self.failures


def fanout_topology(name: str, workers: int, many: bool = False, apart: bool = False) -> Topology:
    """a_src feeds b_all (a block edge) and c_full (a slow `fail` edge, capacity 25); with
    2 workers a_src and c_full share one (the guard decides at the emit) and b_all is in
    the other. `apart`: the names swap places (b_full, c_all): the fail edge is in the
    other worker (its room is credit) and the block edge beside the spout."""
    t = Topology(name, config={"topology.workers": workers, "topology.max.spout.pending": None})
    all_, full_ = ("c_all", "b_full") if apart else ("b_all", "c_full")
    t.set_spout("a_src", Reliable(1500, 10, many))
    t.set_bolt(all_, Record()).shuffle_grouping("a_src")
    t.set_bolt(full_, Record(0.0005)).shuffle_grouping("a_src", overflow="fail", capacity=25)
    return t


@pytest.mark.parametrize(
    "workers, apart", [(1, False), (2, False), (2, True)], ids=["1", "2-local", "2-remote"]
)
@pytest.mark.parametrize("many", [False, True])
def test_a_fan_out_is_all_or_nothing_when_a_fail_edge_is_full(workers, apart, many):
    stats, results = run(fanout_topology("fanout", workers, many, apart))
    all_, full_ = ("c_all", "b_full") if apart else ("b_all", "c_full")
    if workers == 2:
        where = {s.component: s.worker for s in stats.tasks.values()}
        if apart:
            assert where["a_src"] == where[all_] != where[full_]
        else:
            assert where["a_src"] == where[full_] != where[all_]
    (everyone,) = results[all_]
    (full,) = results[full_]
    (failures,) = results["a_src"]
    # all or nothing: the block edge got exactly what the fail edge let in
    assert sorted(everyone) == sorted(full) and len(full) < 1500
    edge = stats.components[full_].edges["a_src:default"]
    assert edge["rejected"] == 1500 - len(full) > 0
    assert edge["arrived"] == edge["executed"] + edge["rejected"] == 1500
    assert edge["last_reason"].startswith("fail: no room for ")
    assert "deliveries to other edges withheld" in edge["last_reason"]
    assert set(failures.values()) == {("overflow", full_)}
    if many:  # one emit_many's rows: every row in, or none
        rows = set(full)
        for first in range(0, 1500, 10):
            got = {first + i in rows for i in range(10)}
            assert len(got) == 1, f"emit_many at {first} went in part"
        assert len(failures) * 10 == edge["rejected"]
    else:
        assert len(failures) == edge["rejected"]
    assert stats.components[all_].executed == len(everyone)


class Relay(BasicBolt):
    """Passes each tuple on, anchored to it (a BasicBolt's emit)."""

    outputs = ["n"]

    def execute(self, tup):
        self.emit((tup.values[0],))


@pytest.mark.parametrize(
    "workers, names",
    [
        (1, ("b_relay", "c_all", "d_full")),
        (2, ("b_relay", "c_all", "d_full")),  # the relay and the fail edge's bolt together
        (2, ("a_relay", "b_all", "c_full")),  # apart: the fail edge's room is credit
    ],
)
def test_a_bolts_anchored_fan_out_is_all_or_nothing_and_fails_the_spouts_tree(workers, names):
    relay, all_, full_ = names
    t = Topology("relay", config={"topology.workers": workers})
    t.set_spout("a_src", Reliable(1500, 10))
    t.set_bolt(relay, Relay()).shuffle_grouping("a_src")
    t.set_bolt(all_, Record()).shuffle_grouping(relay)
    t.set_bolt(full_, Record(0.0005)).shuffle_grouping(relay, overflow="fail", capacity=25)
    stats, results = run(t)
    where = {s.component: s.worker for s in stats.tasks.values()}
    (everyone,), (full,), (failures,) = results[all_], results[full_], results["a_src"]
    edge = stats.components[full_].edges[f"{relay}:default"]
    assert edge["rejected"] > 0 and set(failures.values()) == {("overflow", full_)}
    assert len(failures) == edge["rejected"] == 1500 - len(full)
    assert edge["arrived"] == edge["executed"] + edge["rejected"] == 1500  # counted once
    assert "deliveries to other edges withheld" in edge["last_reason"]
    if names[0] == "a_relay":  # the relay's local edge, and the fail edge in the other worker
        assert where[relay] == where[all_] != where[full_]
    # all or nothing, in one worker or across two: the other edge got what the fail one did
    assert sorted(everyone) == sorted(full)
    assert stats.components[all_].executed == len(everyone)
