"""Per-edge channel policies on a running topology, on 1 worker and across 2: what each
policy keeps, the health counters' sum check, trees of dropped tuples failing with the
reason, lifespans and deadlines.

The bolt is slower than its spout (it sleeps per tuple: simulated work, not waiting for
anything), so the edge is full most of the run; how many tuples each policy lets go
varies from run to run, the accounting does not. With 2 workers the spout and the bolt
run in different workers (tasks are dealt round-robin by component name), so the
receiving worker's link applies the policy."""

from __future__ import annotations

import time

import pytest

from stormish import BasicBolt, Bolt, LocalCluster, Spout, Topology

N = 3000


class Numbers(Spout):
    """0..N-1, 100 a call; reliable with `reliable`: msg id = the number, never replayed,
    every Failure recorded."""

    outputs = ["n"]

    def __init__(self, reliable: bool = False):
        self.reliable = reliable

    def open(self, conf, context):
        self.n = 0
        self.acked: set[int] = set()
        self.failures: dict[int, tuple] = {}

    def next_tuple(self):
        if self.n >= N:
            if not self.reliable or len(self.acked) + len(self.failures) == N:
                self.finish()
            return
        for _ in range(100):
            self.emit((self.n,), msg_id=self.n if self.reliable else None)
            self.n += 1

    def ack(self, msg_id):
        self.acked.add(msg_id)

    def fail(self, msg_id, failure):
        assert msg_id not in self.failures
        self.failures[msg_id] = (failure.reason, failure.component, failure.error)

    def result(self):
        return {"acked": sorted(self.acked), "failures": self.failures}


class Slow(Bolt):
    """Records what it executes (and whether it missed its deadline), acks it."""

    def __init__(self, per_tuple: float = 0.0002):
        self.per_tuple = per_tuple

    def prepare(self, conf, context):
        self.seen: list[int] = []
        self.late = 0

    def execute(self, tup):
        time.sleep(self.per_tuple)
        self.seen.append(tup.values[0])
        self.late += tup.deadline_missed
        self.ack(tup)

    def result(self):
        return {"seen": self.seen, "late": self.late}


def run(workers: int, reliable: bool, per_tuple: float = 0.0002, conf=None, **edge):
    conf = {"topology.workers": workers, **(conf or {})}
    if not reliable:
        conf["topology.acker.executors"] = 0
    t = Topology("edges", config=conf)
    t.set_spout("src", Numbers(reliable))
    t.set_bolt("bolt", Slow(per_tuple)).shuffle_grouping("src", **edge)
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("edges", timeout=90)
        results = cluster._get("edges").results()
    (spout,) = results["src"]
    (bolt,) = results["bolt"]
    return stats, spout, bolt


def check_sum(stats, bolt) -> dict:
    """arrived = executed + dropped + overwritten + rejected + queued, exactly, and every
    tuple the spout emitted arrived; what the bolt ran is what the edge says it ran."""
    edge = stats.components["bolt"].edges["src:default"]
    lost = edge["dropped"] + edge["overwritten"] + edge["rejected"]
    assert edge["queued"] == 0
    assert edge["arrived"] == N == edge["executed"] + lost
    assert edge["executed"] == len(bolt["seen"])
    assert edge["deadline_missed"] == bolt["late"]
    assert bolt["seen"] == sorted(bolt["seen"])  # one upstream task: its order holds
    assert stats.tasks[stats_task(stats, "bolt")].edges["src:default"]["arrived"] == N
    return edge


def stats_task(stats, component):
    (t,) = [t for t, s in stats.tasks.items() if s.component == component]
    return t


@pytest.mark.parametrize("workers", [1, 2])
def test_drop_oldest_keeps_the_newest_and_accounts_for_every_tuple(workers):
    stats, _, bolt = run(workers, False, overflow="drop_oldest", capacity=50)
    edge = check_sum(stats, bolt)
    assert edge["dropped"] > 0 and edge["overwritten"] == edge["rejected"] == 0
    assert bolt["seen"][-1] == N - 1  # the newest is never the one dropped
    assert edge["high_watermark"] == 50
    assert edge["last_reason"].startswith("drop_oldest: queue full (50/50), ")


@pytest.mark.parametrize("workers", [1, 2])
def test_latest_delivers_the_newest_and_counts_the_overwritten(workers):
    stats, _, bolt = run(workers, False, overflow="latest")
    edge = check_sum(stats, bolt)
    assert edge["overwritten"] > 0 and edge["dropped"] == 0
    assert bolt["seen"][-1] == N - 1
    assert edge["high_watermark"] == 1


@pytest.mark.parametrize(
    "overflow,reason,counter",
    [
        ("fail", "overflow", "rejected"),
        ("drop_newest", "dropped", "dropped"),
        ("drop_oldest", "dropped", "dropped"),
        ("latest", "overwritten", "overwritten"),
    ],
)
@pytest.mark.parametrize("workers", [1, 2])
def test_under_acking_a_tuple_let_go_fails_its_tree_with_the_reason(
    workers, overflow, reason, counter
):
    """Each tuple is a tree: the spout hears `fail` once for each tuple the edge let go,
    with the policy's reason and the component whose edge it was; the rest are acked."""
    capacity = None if overflow == "latest" else 40
    stats, spout, bolt = run(workers, True, overflow=overflow, capacity=capacity)
    edge = check_sum(stats, bolt)
    failures = spout["failures"]
    assert len(failures) == edge[counter] > 0
    assert set(failures.values()) == {(reason, "bolt", None)}
    assert spout["acked"] == sorted(bolt["seen"])
    assert sorted(spout["acked"] + list(failures)) == list(range(N))
    assert stats.components["src"].failed == len(failures)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_lifespan_drops_stale_tuples_unexecuted_and_a_deadline_marks_late_ones(workers):
    """On Storm's own edge (block): 3,000 tuples at once into a bolt that takes 0.5 ms
    each cannot all run within 40 ms; those that would have are executed (marked when past
    5 ms), the others fail their trees as stale."""
    stats, spout, bolt = run(workers, True, per_tuple=0.0005, lifespan_ms=40, deadline_ms=5)
    edge = check_sum(stats, bolt)
    assert edge["stale"] == edge["dropped"] > 0
    assert edge["deadline_missed"] > 0
    assert len(spout["failures"]) == edge["stale"]
    assert set(spout["failures"].values()) == {("stale", "bolt", None)}
    assert sorted(spout["acked"] + list(spout["failures"])) == list(range(N))
    assert edge["last_reason"].startswith("stale: ")


class Doubler(BasicBolt):
    outputs = ["n"]

    def execute(self, tup):
        n = tup.values[0]
        if n < 50_000:
            self.emit((n * 2 + 1,))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_dropping_edge_on_a_cycle_never_stalls_it(workers):
    """A bolt feeding itself through a `drop_oldest` edge: nothing on the cycle can block,
    the run completes and the counters add up."""
    t = Topology("cyc", config={"topology.workers": workers, "topology.acker.executors": 0})
    t.set_spout("src", Numbers())
    d = t.set_bolt("loop", Doubler(), parallelism=2)
    d.shuffle_grouping("src")
    d.shuffle_grouping("loop", overflow="drop_oldest", capacity=64)
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("cyc", timeout=90)
    edge = stats.components["loop"].edges["loop:default"]
    emitted = stats.components["loop"].emitted
    assert edge["arrived"] == emitted
    assert edge["arrived"] == edge["executed"] + edge["dropped"]


class Sorter(BasicBolt):
    """Even numbers on 'even' (subscribed), odd ones on 'odd' (nobody subscribes)."""

    streams = {"even": ["n"], "odd": ["n"]}

    def execute(self, tup):
        n = tup.values[0]
        self.emit((n,), stream="even" if n % 2 == 0 else "odd")


@pytest.mark.parametrize(
    "workers, slow_", [(1, "slow"), (2, "slow"), (2, "t_slow")], ids=["1", "2", "2-apart"]
)
def test_dead_letters_receive_emits_nobody_subscribes_to_and_fail_rejections(workers, slow_):
    """A bolt's dead-letter stream gets the tuples it emitted on a stream
    with no subscriber (reason no_subscriber) and those its `fail` edge rejected (reason
    overflow, with the source component and stream); each counted as dead_lettered.
    `t_slow`: the fail edge's bolt is in the other worker than src (rejected on credit,
    at the sender, and dead-lettered where the edge is)."""
    from stormish.testing import CaptureBolt

    t = Topology("dl", config={"topology.workers": workers, "topology.acker.executors": 0})
    t.set_spout("src", Numbers())
    t.set_bolt("sorter", Sorter()).shuffle_grouping("src")
    t.set_bolt("evens", CaptureBolt()).shuffle_grouping("sorter", "even")
    t.set_bolt(slow_, Slow()).shuffle_grouping("src", overflow="fail", capacity=30)
    t.set_bolt("dead", CaptureBolt()).dead_letter_grouping("sorter").dead_letter_grouping(slow_)
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("dl", timeout=90)
        results = cluster._get("dl").results()
    dead = [r for part in results["dead"] for r in part]
    (slow,) = results[slow_]
    where = {s.component: s.worker for s in stats.tasks.values()}
    if slow_ == "t_slow":
        assert where["src"] != where[slow_]
    # a fan-out is all or nothing, the fail edge in src's worker or in the other: the
    # sorter gets only what slow's fail edge let in
    odd = [n for n in slow["seen"] if n % 2]
    orphans = sorted(d for d in dead if d[4] == "no_subscriber")
    assert orphans == sorted((None, "odd", (n,), "sorter", "no_subscriber", 1) for n in odd)
    rejected = [d for d in dead if d[4] == "overflow"]
    edge = stats.components[slow_].edges["src:default"]
    assert len(rejected) == edge["rejected"] > 0
    assert all(d[1] == "default" and d[3] == "src" for d in rejected)
    assert sorted([d[2][0] for d in rejected] + slow["seen"]) == list(range(N))
    assert stats.components["sorter"].dead_lettered == len(odd)
    assert stats.components[slow_].dead_lettered == edge["rejected"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_throttled_edge_slows_the_sender_and_delivers_everything(workers):
    """throttle=0.9 on a block edge into a slow bolt: the sender is held back early (in
    its own worker), every tuple is executed, in order, none lost."""
    conf = {"topology.executor.receive.buffer.size": 256}
    t = Topology("th", config={"topology.workers": workers, "topology.acker.executors": 0, **conf})
    t.set_spout("src", Numbers())
    t.set_bolt("bolt", Slow(0.00005)).shuffle_grouping("src", throttle=0.9)
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete("th", timeout=90)
        results = cluster._get("th").results()
    (bolt,) = results["bolt"]
    assert bolt["seen"] == list(range(N))
    edge = stats.components["bolt"].edges["src:default"]
    assert edge["arrived"] == edge["executed"] == N
    if workers == 1:  # the spout shares the bolt's worker: it is throttled there
        assert edge["throttled"] > 0


HEALTH = {"topology.edge.health.events": True}


class _Stats:
    """A Backend for the REST app that serves one finished run's statistics."""

    def __init__(self, stats):
        self.s = stats

    def topologies(self):
        return [{"name": self.s.name, "status": self.s.status}]

    def stats(self, name):
        if name != self.s.name:
            raise KeyError(name)
        return self.s


@pytest.mark.parametrize("workers", [1, 2])
def test_health_events_record_overflow_and_high_watermark_with_depth_and_capacity(workers):
    """With topology.edge.health.events the drops are also events (edge,
    policy, reason, depth, capacity), bounded per worker, served at /events in time
    order; the counters and the accounting are what they are without events."""
    from stormish.runtime.health import EVENTS_KEPT
    from stormish.ui.rest import RestApp

    stats, _, bolt = run(workers, False, conf=HEALTH, overflow="drop_oldest", capacity=50)
    check_sum(stats, bolt)
    events = RestApp(_Stats(stats)).route("GET", "/api/v1/topology/edges/events", {})["events"]
    reasons = {e["reason"] for e in events}
    assert {"overflow", "high_watermark"} <= reasons, reasons
    for e in events:
        assert e["edge"] == "src:default" and e["policy"] == "drop_oldest"
        assert e["capacity"] == 50 and 0 <= e["depth"] <= 50
        assert e["task"] == stats_task(stats, "bolt")
    over = [e for e in events if e["reason"] == "overflow"]
    assert all("oldest dropped" in e["detail"] for e in over)
    assert len(events) <= EVENTS_KEPT * workers
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)


@pytest.mark.parametrize("workers", [1, 2])
def test_health_events_for_stale_drops_and_missed_deadlines(workers):
    stats, _, bolt = run(
        workers, True, per_tuple=0.0005, conf=HEALTH, lifespan_ms=40, deadline_ms=5
    )
    check_sum(stats, bolt)
    events = stats.tasks[stats_task(stats, "bolt")].health_events
    assert {"stale", "deadline_missed"} <= {e["reason"] for e in events}


def test_an_edge_can_keep_its_events_out_and_behave_the_same():
    stats, _, bolt = run(
        1, False, conf=HEALTH, overflow="drop_oldest", capacity=50, emit_health_events=False
    )
    edge = check_sum(stats, bolt)
    assert edge["dropped"] > 0 and edge["policy"]["emit_health_events"] is False
    assert stats.tasks[stats_task(stats, "bolt")].health_events == ()


def test_health_events_are_off_by_default():
    stats, _, bolt = run(1, False, overflow="drop_oldest", capacity=50)
    assert check_sum(stats, bolt)["dropped"] > 0
    assert all(t.health_events == () for t in stats.tasks.values())
