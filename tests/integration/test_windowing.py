"""Windowed bolts and JoinBolt in running topologies: FeederSpouts in, a sink writing
what it gets to a file (so worker processes can report too), simulated time on one
worker (FakeClock, advance_time) and the real clock on two.

Acceptance: Storm's documented event-time example, the late tuple stream,
acking on expiry, the submit check of the message timeout, a sliding count window, a
session window, tumbling processing-time windows, and users x orders joins.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stormish import Bolt, ConfigError, LocalCluster, Spout, Topology
from stormish.testing import (
    FakeClock,
    FeederSpout,
    ListSpout,
    advance_time,
    poll_for,
    tracked_wait,
)
from stormish.windowing import Count, Duration, JoinBolt, WindowedBolt

from .parts import CountingSpout, FailAll

pytestmark = pytest.mark.timeout(120)
BASE = datetime(2026, 1, 1, 6, 0, 0, tzinfo=UTC).timestamp()


class Lister(WindowedBolt):
    """Emits each window as (start, end, ids, new, expired), times relative to BASE."""

    outputs = ["start", "end", "ids", "new", "expired", "key"]

    def execute_window(self, window):
        def ids(ts):
            return [t["id"] for t in ts]

        rel = [None if x is None else round(x - BASE, 3) for x in (window.start, window.end)]
        self.emit([*rel, ids(window.tuples), ids(window.new), ids(window.expired), window.key])


class Lines(Bolt):
    """Appends (stream, values) of each tuple to a JSON-lines file and acks it."""

    def __init__(self, path):
        self.path = str(path)

    def execute(self, tup):
        if tup.is_tick:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps([tup.stream, list(tup.values)], default=str) + "\n")
        self.ack(tup)


def read(path, stream="default"):
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [values for s, values in rows if s == stream]


def acceptance_topology(feeder, path, name="accept", interval=1.0):
    t = Topology(name, config={"topology.message.timeout.secs": 60})
    t.set_spout("events", feeder)
    win = (
        Lister()
        .with_window(length=Duration(seconds=20), slide=Duration(seconds=10))
        .with_timestamp_field("ts")
        .with_lag(seconds=5)
        .with_watermark_interval(seconds=interval)
        .with_late_tuple_stream("late")
    )
    t.set_bolt("win", win).global_grouping("events")
    sink = t.set_bolt("sink", Lines(path))
    sink.shuffle_grouping("win").shuffle_grouping("win", "late")
    return t


EVENTS = [("e1", 3), ("e2", 5), ("e3", 7), ("e4", 18), ("e5", 26), ("e6", 36)]
WINDOWS = [
    [-10, 10, ["e1", "e2", "e3"], ["e1", "e2", "e3"], []],
    [0, 20, ["e1", "e2", "e3", "e4"], ["e4"], []],
    [10, 30, ["e4", "e5"], ["e5"], ["e1", "e2", "e3"]],
]


def test_storm_documented_example_on_a_fake_clock(tmp_path):
    """Watermark 06:00:31 (e6 at :36 - lag 5) evaluates three windows; e6 waits; a
    tuple stamped 06:00:01 arriving after that goes to the late stream, acked."""
    path = tmp_path / "out.jsonl"
    with FeederSpout(["id", "ts"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        cluster.submit(acceptance_topology(feeder, path))
        for n, (name, s) in enumerate(EVENTS, 1):
            feeder.feed([name, BASE + s], msg_id=n)
        tracked_wait(cluster, "accept", len(EVENTS))
        assert read(path) == []  # nothing until the watermark passes a window
        advance_time(cluster, 1)
        assert [w[:5] for w in read(path)] == WINDOWS
        assert sorted(feeder.acked) == [1, 2, 3]  # e1-e3 expired; e4-e6 still windowed
        advance_time(cluster, 3)
        assert len(read(path)) == 3  # e6 waits for a later watermark
        feeder.feed(["late1", BASE + 1], msg_id=7)
        tracked_wait(cluster, "accept", 1)
        late = read(path, "late")
        assert [(r[0], r[1] - BASE, r[2], r[3]) for r in late] == [
            ({"id": "late1", "ts": BASE + 1}, 1.0, "events", "default")
        ]
        assert feeder.is_acked(7) and not feeder.failed


@pytest.mark.parametrize("workers", [1, 2])
def test_storm_documented_example_on_worker_processes(tmp_path, workers):
    """The same on the real clock, in-process and across two worker processes."""
    path = tmp_path / "out.jsonl"
    with FeederSpout(["id", "ts"]) as feeder, LocalCluster(workers=workers) as cluster:
        cluster.submit(acceptance_topology(feeder, path, "accept2", interval=0.1))
        for n, (name, s) in enumerate(EVENTS, 1):
            feeder.feed([name, BASE + s], msg_id=n)
        poll_for(lambda: len(read(path)) >= 3, 30, what="three windows")
        assert [w[:5] for w in read(path)] == WINDOWS
        poll_for(lambda: sorted(feeder.acked) == [1, 2, 3], 30, what="e1-e3 acked")
        feeder.feed(["late1", BASE + 1], msg_id=7)
        poll_for(lambda: read(path, "late"), 30, what="the late tuple")
        poll_for(lambda: feeder.is_acked(7), 30, what="the late tuple acked")
        assert len(read(path)) == 3 and not feeder.failed


def test_message_timeout_shorter_than_the_window_is_refused_at_submit(tmp_path):
    with FeederSpout(["id", "ts"]) as feeder, LocalCluster() as cluster:
        t = acceptance_topology(feeder, tmp_path / "x", "short")
        t.config["topology.message.timeout.secs"] = 30
        with pytest.raises(ConfigError) as err:
            cluster.submit(t)
    msg = str(err.value)
    assert "'win'" in msg and "topology.message.timeout.secs" in msg
    assert "length 20 + slide 10 + lag 5 + watermark interval 1 = 36 s" in msg


class SessionCount(WindowedBolt):
    outputs = ["n"]

    def execute_window(self, window):
        self.emit([len(window.tuples)])


@pytest.mark.parametrize("session", [False, True], ids=["tumbling", "session"])
def test_the_watermark_interval_counts_toward_the_message_timeout(session):
    """Windows are evaluated (sessions closed) only at a watermark tick: a 60 s interval
    with a 5 s window passed a 15 s timeout, and then tuples timed out in their window
    (found by a bug hunt)."""
    w = SessionCount()
    w = (
        w.with_session_window(gap=Duration(seconds=2))
        if session
        else w.with_tumbling_window(Duration(seconds=5))
    )
    t = Topology("wmi", config={"topology.message.timeout.secs": 15})
    t.set_spout("events", CountingSpout(1))
    t.set_bolt("win", w.with_timestamp_field("n").with_watermark_interval(60)).global_grouping(
        "events"
    )
    with pytest.raises(ConfigError, match="watermark interval 60 = (62|70) s"):
        t.validate()


def test_an_open_session_longer_than_the_message_timeout_keeps_its_tuples():
    """A session lasts as long as its key keeps coming: its first tuples timed out and
    were replayed while it was still open (found by a bug hunt). Their timeouts are reset
    while it is open, as Storm's resetTimeout does."""
    t = Topology("long-session", config={"topology.message.timeout.secs": 9})
    with FeederSpout(["id"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t.set_spout("events", feeder)
        w = SessionCount().with_session_window(gap=Duration(seconds=3))
        t.set_bolt("win", w).global_grouping("events")
        t.set_bolt("sink", Lines(os.devnull)).shuffle_grouping("win")
        cluster.submit(t)
        for n in range(40):  # one tuple a second: one session of 40 s
            feeder.feed([n], msg_id=n)
            tracked_wait(cluster, "long-session", 1)
            advance_time(cluster, 1)
        assert feeder.failed == []
        advance_time(cluster, 6)  # the gap passes: the session closes
        assert feeder.failed == [] and sorted(feeder.acked) == list(range(40))


def test_count_window_longer_than_max_spout_pending_is_refused():
    t = Topology("pending", config={"topology.max.spout.pending": 10})
    with FeederSpout(["id"]) as feeder:
        t.set_spout("in", feeder)
        t.set_bolt("win", Lister().with_window(Count(8), Count(4))).shuffle_grouping("in")
        with pytest.raises(ConfigError, match=r"max.spout.pending.*length 8 \+ slide 4 = 12"):
            t.validate()


def test_sliding_count_window_acks_what_expires(tmp_path):
    """Count(4) sliding by 2, processing time: windows [1,2], [1-4], [3-6]; 1 and 2 are
    acked when they leave, the rest stay unacked in the window."""
    path = tmp_path / "out.jsonl"
    with FeederSpout(["id"]) as feeder, LocalCluster() as cluster:
        t = Topology("counts")
        t.set_spout("in", feeder)
        t.set_bolt("win", Lister().with_window(Count(4), Count(2))).global_grouping("in")
        t.set_bolt("sink", Lines(path)).shuffle_grouping("win")
        cluster.submit(t)
        for i in range(1, 7):
            feeder.feed([i], msg_id=i)
        tracked_wait(cluster, "counts", 6)
        assert [w[2:5] for w in read(path)] == [
            [[1, 2], [1, 2], []],
            [[1, 2, 3, 4], [3, 4], []],
            [[3, 4, 5, 6], [5, 6], [1, 2]],
        ]
        assert sorted(feeder.acked) == [1, 2] and not feeder.failed


def test_tumbling_processing_time_windows_follow_the_fake_clock(tmp_path):
    path = tmp_path / "out.jsonl"
    with FeederSpout(["id"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t = Topology("tumble")
        t.set_spout("in", feeder)
        t.set_bolt("win", Lister().with_tumbling_window(Duration(seconds=10))).global_grouping("in")
        t.set_bolt("sink", Lines(path)).shuffle_grouping("win")
        cluster.submit(t)
        for i in (1, 2, 3):
            feeder.feed([i], msg_id=i)
        advance_time(cluster, 10)
        for i in (4, 5):
            feeder.feed([i], msg_id=i)
        advance_time(cluster, 10)
        assert [w[2:5] for w in read(path)] == [
            [[1, 2, 3], [1, 2, 3], []],
            [[4, 5], [4, 5], [1, 2, 3]],
        ]
        assert sorted(feeder.acked) == [1, 2, 3]


def test_event_time_session_windows_per_key(tmp_path):
    """Sessions per user with gap 10 s and grace 2 s: each is emitted once the watermark
    passes its last tuple + gap + grace, and its tuples are acked after it ran."""
    path = tmp_path / "out.jsonl"
    with FeederSpout(["id", "user", "ts"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t = Topology("sessions", config={"topology.message.timeout.secs": 60})
        t.set_spout("in", feeder)
        win = (
            Lister()
            .with_session_window(gap=Duration(seconds=10), grace=Duration(seconds=2), key="user")
            .with_timestamp_field("ts")
        )
        t.set_bolt("win", win).fields_grouping("in", ["user"])
        t.set_bolt("sink", Lines(path)).shuffle_grouping("win")
        cluster.submit(t)
        rows = [("a1", "ann", 0), ("b1", "bob", 1), ("a2", "ann", 5), ("b2", "bob", 20),
                ("a3", "ann", 40)]  # fmt: skip
        for n, (i, user, s) in enumerate(rows, 1):
            feeder.feed([i, user, BASE + s], msg_id=n)
        tracked_wait(cluster, "sessions", len(rows))
        advance_time(cluster, 1)  # watermark 40: ann's [0, 15) and bob's [1, 11) closed
        got = sorted((w[5], w[2], w[0], w[1]) for w in read(path))
        assert got == [
            ("ann", ["a1", "a2"], 0, 15),
            ("bob", ["b1"], 1, 11),
            ("bob", ["b2"], 20, 30),
        ]
        assert sorted(feeder.acked) == [1, 2, 3, 4]  # a3 is in an open session


USERS = [(1, "roshan"), (2, "harsha"), (3, "siva"), (4, "hugo")]
ORDERS = [(11, 2, 7), (12, 2, 3), (13, 3, 4)]


@pytest.mark.parametrize("kind, expected", [
    ("inner", [[2, "harsha", 11], [2, "harsha", 12], [3, "siva", 13]]),
    ("left", [[1, "roshan", None], [2, "harsha", 11], [2, "harsha", 12], [3, "siva", 13],
              [4, "hugo", None]]),
])  # fmt: skip
def test_join_users_and_orders(tmp_path, kind, expected):
    """Storm's JoinBolt example: users x orders on userId over a tumbling window."""
    path = tmp_path / "out.jsonl"
    with (
        FeederSpout(["userId", "name"]) as users,
        FeederSpout(["orderId", "userId", "price"]) as orders,
        LocalCluster(clock=FakeClock()) as cluster,
    ):
        t = Topology("join")
        t.set_spout("users", users)
        t.set_spout("orders", orders)
        join = JoinBolt("users", "userId")
        join = (
            join.join("orders", "userId", "users")
            if kind == "inner"
            else join.left_join("orders", "userId", "users")
        )
        join.select("userId, name, orderId").with_tumbling_window(Duration(seconds=10))
        t.set_bolt("join", join).fields_grouping("users", ["userId"]).fields_grouping(
            "orders", ["userId"]
        )
        t.set_bolt("sink", Lines(path)).shuffle_grouping("join")
        cluster.submit(t)
        for n, u in enumerate(USERS):
            users.feed(list(u), msg_id=n)
        for n, o in enumerate(ORDERS):
            orders.feed(list(o), msg_id=n)
        tracked_wait(cluster, "join", len(USERS) + len(ORDERS))
        advance_time(cluster, 10)
        assert sorted(read(path), key=lambda r: (r[0], r[2] or 0)) == expected
        advance_time(cluster, 10)  # the next window expires (and acks) them all
        assert sorted(users.acked) == list(range(len(USERS)))
        assert sorted(orders.acked) == list(range(len(ORDERS)))


@pytest.mark.parametrize("workers", ["1", "2"])
def test_rolling_top_words_example_runs_and_ranks_correctly(workers):
    """topologies/rolling_top_words.py under `stormish run`: it completes in seconds and
    every ranking it prints is the true top 3 of its 5-minute window of event time."""
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "run", "topologies/rolling_top_words.py",
         "-w", workers],
        cwd=root, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "topology 'rolling-top-words': complete" in r.stdout
    sys.path.insert(0, str(root / "topologies"))
    try:
        import rolling_top_words as example
    finally:
        sys.path.pop(0)
    events = example.words()
    lines = re.findall(r"(\d\d:\d\d)-(\d\d:\d\d) top 3: (.*)$", r.stdout + r.stderr, re.M)
    assert len(lines) >= 20, r.stdout + r.stderr
    for _, end, ranking in lines:
        hh, mm = map(int, end.split(":"))
        e = example.START + (hh - 6) * 3600 + mm * 60
        counts: dict[str, int] = {}
        for w, ts in events:
            if e - 300 < ts <= e:
                counts[w] = counts.get(w, 0) + 1
        assert ranking == ", ".join(f"{w} {c}" for w, c in example.top(counts)), end


class Picky(Lister):
    def execute_window(self, window):
        if any(t["id"] == "bad" for t in window.tuples):
            raise ValueError("no bad windows")
        super().execute_window(window)


def test_a_window_that_raises_fails_its_tuples_and_drops_them(tmp_path):
    """At least once: the tuples of a window whose execute_window raised are failed (so
    replayed) and never acked or windowed again; the bolt goes on with the next ones."""
    path = tmp_path / "out.jsonl"
    with FeederSpout(["id"]) as feeder, LocalCluster() as cluster:
        t = Topology("picky")
        t.set_spout("in", feeder)
        t.set_bolt("win", Picky().with_window(Count(3), Count(2))).global_grouping("in")
        t.set_bolt("sink", Lines(path)).shuffle_grouping("win")
        cluster.submit(t)
        for n, i in enumerate([1, 2, 3, "bad", 5, 6, 7, 8], 1):
            feeder.feed([i], msg_id=n)
        tracked_wait(cluster, "picky", 8)
        assert [w[2] for w in read(path)] == [[1, 2], [5, 6], [6, 7, 8]]
        assert sorted(feeder.failed) == [2, 3, 4]  # the raising window was [2, 3, bad]
        assert sorted(feeder.acked) == [1, 5]
        stats = cluster.statistics("picky")
        assert stats.components["win"].errors == 1
        errors = [e for task in stats.tasks.values() for e in task.last_errors]
        assert any("no bad windows" in e for e in errors)


class Boom(WindowedBolt):
    outputs = ["n"]

    def execute_window(self, window):
        raise RuntimeError("boom")


def test_the_tuple_that_closes_a_raising_window_is_failed_once():
    """The window's tuples were failed, then the engine failed the one being executed
    again: 3 fails counted for 2 tuples (found by a bug hunt)."""
    t = Topology("boom", config={"topology.message.timeout.secs": 30})
    with FeederSpout(["id"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t.set_spout("events", feeder)
        t.set_bolt("win", Boom().with_tumbling_window(Count(2))).global_grouping("events")
        cluster.submit(t)
        feeder.feed([1], msg_id=1)
        feeder.feed([2], msg_id=2)
        tracked_wait(cluster, "boom", 2)
        assert sorted(feeder.failed) == [1, 2]
        win = cluster.statistics("boom").components["win"]
        assert (win.failed, win.errors) == (2, 1)


class DirectWin(WindowedBolt):
    outputs = ["n"]

    def prepare(self, conf, context):
        self.to = context.get_component_tasks("sink")[0]

    def execute_window(self, window):
        self.emit_direct(self.to, [len(window.tuples)])


def test_emit_direct_in_execute_window_is_anchored_to_the_window():
    """Storm's WindowedOutputCollector anchors emitDirect as it anchors emit: a fail
    downstream replays the window's tuples. They were acked as they expired instead."""
    t = Topology("direct-win", config={"topology.message.timeout.secs": 30})
    with FeederSpout(["id"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        t.set_spout("events", feeder)
        t.set_bolt("win", DirectWin().with_tumbling_window(Count(2))).global_grouping("events")
        t.set_bolt("sink", FailAll()).direct_grouping("win")
        cluster.submit(t)
        for n in range(4):
            feeder.feed([n], msg_id=n)
        tracked_wait(cluster, "direct-win", 4)
        assert sorted(feeder.failed) == [0, 1, 2, 3] and feeder.acked == []


def test_event_time_join_on_two_workers(tmp_path):
    """A left join with two tasks on two worker processes, in event time: users and
    orders grouped by userId meet in one task; later tuples on both streams (stamped
    25 s on) move each task's watermark past the first window, which then joins."""
    path = tmp_path / "out.jsonl"
    with (
        FeederSpout(["userId", "name", "ts"]) as users,
        FeederSpout(["orderId", "userId", "price", "ts"]) as orders,
        LocalCluster(workers=2) as cluster,
    ):
        t = Topology("join2", config={"topology.message.timeout.secs": 60})
        t.set_spout("users", users)
        t.set_spout("orders", orders)
        join = (
            JoinBolt("users", "userId")
            .left_join("orders", "userId", "users")
            .select("userId, name, orderId")
            .with_tumbling_window(Duration(seconds=10))
            .with_timestamp_field("ts")
            .with_watermark_interval(0.1)
        )
        t.set_bolt("join", join, parallelism=2).fields_grouping(
            "users", ["userId"]
        ).fields_grouping("orders", ["userId"])
        t.set_bolt("sink", Lines(path)).shuffle_grouping("join")
        cluster.submit(t)
        for n, (uid, name) in enumerate(USERS):
            users.feed([uid, name, BASE + n], msg_id=n)
        for n, (oid, uid, price) in enumerate(ORDERS):
            orders.feed([oid, uid, price, BASE + 5 + n], msg_id=n)
        for uid, _ in USERS:  # a later tuple of both streams for every task's keys
            users.feed([uid, "later", BASE + 25], msg_id=f"later-u{uid}")
            orders.feed([99, uid, 0, BASE + 25], msg_id=f"later-o{uid}")
        want = [[1, "roshan", None], [2, "harsha", 11], [2, "harsha", 12], [3, "siva", 13],
                [4, "hugo", None]]  # fmt: skip
        poll_for(lambda: len(read(path)) >= len(want), 30, what="the joined rows")
        assert sorted(read(path), key=lambda r: (r[0], r[2] or 0)) == want
        poll_for(lambda: len(users.acked) == len(USERS), 30, what="the first window acked")
        assert sorted(users.acked) == list(range(len(USERS)))  # the later ones still wait
        assert not users.failed and not orders.failed


def test_watermark_after_every_tuple_and_a_late_one(tmp_path):
    """Storm's WindowedBoltExecutorTest.testExecuteWithLateTupleStream: with a watermark
    after each tuple (a tick on the fake clock), the windows follow as in Storm and the
    tuple stamped 600 that comes after 636 (watermark 631) goes to the late stream."""
    path = tmp_path / "out.jsonl"
    with FeederSpout(["id", "ts"]) as feeder, LocalCluster(clock=FakeClock()) as cluster:
        cluster.submit(acceptance_topology(feeder, path, "each"))
        for n, s in enumerate((603, 605, 607, 618, 626, 636, 600), 1):
            feeder.feed([s, BASE + s - 600], msg_id=n)
            tracked_wait(cluster, "each", 1)
            advance_time(cluster, 1)
        assert [w[2] for w in read(path)] == [[603, 605, 607], [603, 605, 607, 618], [618, 626]]
        assert [r[0]["id"] for r in read(path, "late")] == [600]
        assert sorted(feeder.acked) == [1, 2, 3, 7]


class NoSuperLister(Lister):
    """A Storm user's windowed bolt: its own prepare, no super().prepare(...) call."""

    def prepare(self, conf, context):
        self.prepared_by_user = True

    def execute_window(self, window):
        assert self.prepared_by_user
        super().execute_window(window)


class NoSuperJoin(JoinBolt):
    def prepare(self, conf, context):
        self.joined = 0


@pytest.mark.parametrize("workers", [1, 2])
def test_windowed_and_join_bolts_need_no_super_prepare(tmp_path, workers):
    """The engine sets a windowed bolt up outside the user's prepare (Storm's
    windowed bolts need no base call); the windows and the join run as without it."""
    path = tmp_path / "out.jsonl"
    t = Topology("nosuper", config={"topology.message.timeout.secs": 60})
    with FeederSpout(["id", "ts"]) as feeder, FeederSpout(["uid", "ts"]) as users:
        t.set_spout("events", feeder)
        t.set_spout("users", users)
        win = (
            NoSuperLister()
            .with_window(length=Duration(seconds=20), slide=Duration(seconds=10))
            .with_timestamp_field("ts")
            .with_lag(seconds=5)
            .with_watermark_interval(seconds=0.1)
        )
        t.set_bolt("win", win).global_grouping("events")
        join = (
            NoSuperJoin("events", "id")
            .join("users", "uid", "events")
            .select("id,ts")
            .with_tumbling_window(Count(1))
        )
        t.set_bolt("join", join).fields_grouping("events", ["id"]).fields_grouping("users", ["uid"])
        t.set_bolt("sink", Lines(path)).shuffle_grouping("win")
        with LocalCluster(workers=workers) as cluster:
            cluster.submit(t)
            for n, (name, s) in enumerate(EVENTS, 1):
                feeder.feed([name, BASE + s], msg_id=n)
            poll_for(lambda: len(read(path)) >= 3, 30, what="three windows")
            assert [w[:5] for w in read(path)] == WINDOWS
            # e1-e3 left the window and each went through the join: none failed
            poll_for(lambda: sorted(feeder.acked) == [1, 2, 3], 30, what="e1-e3 acked")
            assert not feeder.failed


def test_millisecond_timestamps_are_warned_once_naming_the_component(tmp_path, caplog):
    """Storm's timestamps are ms; an int above 10^11 in the timestamp field is
    said once per task (the component, the value, the field), and the run goes on."""
    path = tmp_path / "out.jsonl"
    base_ms = int(BASE * 1000)
    with FeederSpout(["id", "ts"]) as feeder, LocalCluster() as cluster:
        t = Topology("msts", config={"topology.message.timeout.secs": 60})
        t.set_spout("events", feeder)
        win = Lister().with_tumbling_window(Count(2)).with_timestamp_field("ts")
        t.set_bolt("win", win).global_grouping("events")
        t.set_bolt("sink", Lines(path)).shuffle_grouping("win")
        with caplog.at_level("WARNING", logger="stormish.windowing"):
            cluster.submit(t)
            for n in range(4):
                feeder.feed([f"e{n}", base_ms + n], msg_id=n)
            tracked_wait(cluster, "msts", 4)
            poll_for(lambda: len(read(path)) == 2, 30, what="two count windows, all the same")
    said = [r.getMessage() for r in caplog.records if r.name == "stormish.windowing"]
    assert len(said) == 1, said
    assert "'win'" in said[0] and str(base_ms) in said[0] and "'ts'" in said[0]


def test_millisecond_timestamps_are_warned_in_the_workers_log_on_two_workers(capfd):
    """The same on worker processes: said once, by the worker that runs the windowed
    bolt (its log lines reach the run's output), naming it and the value."""
    from stormish.testing import CaptureBolt, ListSpout

    base_ms = int(BASE * 1000)
    t = Topology("msts2", config={"topology.workers": 2, "topology.message.timeout.secs": 60})
    t.set_spout("events", ListSpout([(f"e{n}", base_ms + n) for n in range(4)], ["id", "ts"]))
    win = Lister().with_tumbling_window(Count(2)).with_timestamp_field("ts")
    t.set_bolt("win", win).global_grouping("events")
    t.set_bolt("sink", CaptureBolt()).shuffle_grouping("win")
    with LocalCluster() as cluster:
        cluster.submit(t)
        stats = cluster.wait_complete(t.name, timeout=30)
    at = next(s.worker for s in stats.tasks.values() if s.component == "win")
    out = capfd.readouterr()
    said = [ln for ln in (out.out + out.err).splitlines() if "looks like milliseconds" in ln]
    assert len(said) == 1, said
    assert f"worker msts2/{at} " in said[0] and "'win'" in said[0]
    assert str(base_ms) in said[0] and "'ts'" in said[0]


@pytest.mark.parametrize("workers", [1, 2])
def test_storm_documented_example_as_a_finite_run_completes(workers):
    """The documented example fed by a finite reliable spout, acking on. When
    the spout has emitted everything (finish_input) and nothing moves, time goes to its
    end: every remaining window runs, its tuples are acked, and the run completes with
    nothing failed, in seconds rather than at the 60 s message timeout."""
    from stormish.testing import CaptureBolt, ListSpout, run_topology

    t = Topology("finite-win", config={"topology.message.timeout.secs": 60})
    t.set_spout("events", ListSpout([(n, BASE + s) for n, s in EVENTS], ["id", "ts"]))
    win = (
        Lister()
        .with_window(length=Duration(seconds=20), slide=Duration(seconds=10))
        .with_timestamp_field("ts")
        .with_lag(seconds=5)
        .with_watermark_interval(seconds=0.2)
    )
    t.set_bolt("win", win).global_grouping("events")
    t.set_bolt("sink", CaptureBolt()).shuffle_grouping("win")
    res = run_topology(t, timeout=40, workers=workers)  # the trees time out at 60 s
    got = [list(w[:5]) for w in res.captured["sink"]]
    assert got == [
        *WINDOWS,
        [20, 40, ["e5", "e6"], ["e6"], ["e4"]],  # the watermark at its end: e6's windows
        [30, 50, ["e6"], [], ["e5"]],
    ]
    spout = res.stats.components["events"]
    assert spout.acked == len(EVENTS) and spout.failed == 0


@pytest.mark.parametrize("workers", [1, 2])
def test_finite_runs_close_session_windows_and_joins(workers):
    """The same end of input for event-time sessions (every open session closes) and a
    processing-time JoinBolt (its last tumbling window runs), acking on."""
    from stormish.testing import CaptureBolt, ListSpout, run_topology

    t = Topology("finite-sess", config={"topology.message.timeout.secs": 60})
    rows = [("a1", "ann", 0), ("b1", "bob", 1), ("a2", "ann", 5), ("b2", "bob", 20),
            ("a3", "ann", 40)]  # fmt: skip
    t.set_spout("in", ListSpout([(i, u, BASE + s) for i, u, s in rows], ["id", "user", "ts"]))
    win = (
        Lister()
        .with_session_window(gap=Duration(seconds=10), key="user")
        .with_timestamp_field("ts")
        .with_watermark_interval(seconds=0.2)
    )
    t.set_bolt("win", win).fields_grouping("in", ["user"])
    t.set_bolt("sessions", CaptureBolt()).shuffle_grouping("win")
    t.set_spout("users", ListSpout(USERS, ["userId", "name"]))
    t.set_spout("orders", ListSpout(ORDERS, ["orderId", "userId", "price"]))
    join = JoinBolt("users", "userId").join("orders", "userId", "users")
    join.select("userId, name, orderId").with_tumbling_window(Duration(seconds=20))
    t.set_bolt("join", join).fields_grouping("users", ["userId"]).fields_grouping(
        "orders", ["userId"]
    )
    t.set_bolt("joined", CaptureBolt()).shuffle_grouping("join")
    res = run_topology(t, timeout=40, workers=workers)
    got = sorted((w[5], w[2], w[0], w[1]) for w in res.captured["sessions"])
    assert got == [
        ("ann", ["a1", "a2"], 0, 15),
        ("ann", ["a3"], 40, 50),  # open until the end of input
        ("bob", ["b1"], 1, 11),
        ("bob", ["b2"], 20, 30),
    ]
    assert sorted(map(list, res.captured["joined"])) == [
        [2, "harsha", 11], [2, "harsha", 12], [3, "siva", 13]
    ]  # fmt: skip
    for name in ("in", "users", "orders"):
        assert res.stats.components[name].failed == 0, name


class Unreliable(Spout):
    """The documented example's events without message ids (acking has nothing to wait
    for), then finish."""

    outputs = ["id", "ts"]

    def open(self, conf, context):
        self.todo = [(n, BASE + s) for n, s in EVENTS]

    def next_tuple(self):
        if self.todo:
            self.emit(list(self.todo.pop(0)))
        else:
            self.finish()


@pytest.mark.parametrize("workers", [1, 2])
def test_an_unreliable_finite_run_still_runs_its_last_windows(workers):
    """Nothing holds the run open (no trees), yet the end of input is the end of time:
    the windows that the watermark had not reached run before the run completes."""
    from stormish.testing import CaptureBolt, run_topology

    t = Topology("unrel-win", config={"topology.message.timeout.secs": 60})
    t.set_spout("events", Unreliable())
    win = (
        Lister()
        .with_window(length=Duration(seconds=20), slide=Duration(seconds=10))
        .with_timestamp_field("ts")
        .with_lag(seconds=5)
        .with_watermark_interval(seconds=0.2)
    )
    t.set_bolt("win", win).global_grouping("events")
    t.set_bolt("sink", CaptureBolt()).shuffle_grouping("win")
    res = run_topology(t, timeout=40, workers=workers)
    got = [list(w[:5]) for w in res.captured["sink"]]
    assert got == [*WINDOWS, [20, 40, ["e5", "e6"], ["e6"], ["e4"]], [30, 50, ["e6"], [], ["e5"]]]


class SlowWindow(WindowedBolt):
    """Its window takes 200 ms (a lookup, a model) before it emits what was new."""

    outputs = ["n"]

    def execute_window(self, window):
        time.sleep(0.2)
        for t in window.new:
            self.emit([t.values[0]])


@pytest.mark.parametrize("workers", [1, 2])
def test_a_slow_last_window_reaches_the_sink_before_the_run_ends(workers):
    """Only the end of input runs the 10 s tumbling window, and its run was invisible to
    the completion rule (the last tick is counted neither sent nor consumed): the run
    ended while it slept and the sink got none of the 100."""
    from stormish.testing import CaptureBolt, run_topology

    t = Topology(f"slow-last-window-{workers}")
    t.set_spout("nums", CountingSpout(100))
    t.set_bolt("win", SlowWindow().with_tumbling_window(Duration(seconds=10))).shuffle_grouping(
        "nums"
    )
    t.set_bolt("sink", CaptureBolt()).shuffle_grouping("win")
    res = run_topology(t, timeout=60, workers=workers, config={"topology.acker.executors": 0})
    assert sorted(v[0] for v in res.captured["sink"]) == list(range(100))


class TickBuffer(Bolt):
    """Holds what it gets and emits it on tick tuples (a batching writer's shape)."""

    outputs = ["n"]
    component_config = {"topology.tick.tuple.freq.secs": 1}

    def prepare(self, conf, context):
        self.held = []

    def execute(self, tup):
        if tup.is_tick:
            for t in self.held:
                self.emit(list(t.values), anchors=[t])
                self.ack(t)
            self.held = []
        else:
            self.held.append(tup)


class EveryTick(Bolt):
    """Emits on every tick whatever came (a status line): it must not keep a run open."""

    outputs = ["n"]
    component_config = {"topology.tick.tuple.freq.secs": 1}

    def execute(self, tup):
        if tup.is_tick:
            self.emit([-1])
        else:
            self.ack(tup)


@pytest.mark.parametrize("acking", [0, 1])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_bolt_that_flushes_on_ticks_gets_a_last_tick_at_the_end_of_input(workers, acking):
    """With acking off the run ended before the next tick (within ms): its buffer, and
    the next bolt's fed by it, were lost. Each now gets a last tick, and a bolt that
    emits on every tick regardless does not keep the run from ending."""
    from stormish.testing import CaptureBolt, run_topology

    reliable = acking == 1
    t = Topology(f"tick-flush-{workers}-{acking}")
    t.set_spout("nums", ListSpout([[i] for i in range(100)]) if reliable else CountingSpout(100))
    t.set_bolt("first", TickBuffer()).shuffle_grouping("nums")
    t.set_bolt("second", TickBuffer()).shuffle_grouping("first")
    t.set_bolt("status", EveryTick()).shuffle_grouping("nums")
    t.set_bolt("sink", CaptureBolt()).shuffle_grouping("second")
    res = run_topology(t, timeout=60, workers=workers, config={"topology.acker.executors": acking})
    assert sorted(v[0] for v in res.captured["sink"]) == list(range(100))


class FinishWhenAcked(Spout):
    """Emits 15 reliable tuples and calls finish() only once all are acked: what a spout
    that wants its input confirmed does, and what a count window can never give it."""

    outputs = ["id"]

    def open(self, conf, context):
        self.next_id, self.unacked = 0, set()

    def next_tuple(self):
        if self.next_id < 15:
            self.unacked.add(self.next_id)
            self.emit([self.next_id], msg_id=self.next_id)
            self.next_id += 1
        elif not self.unacked:
            self.finish()

    def ack(self, msg_id):
        self.unacked.discard(msg_id)


def test_a_finite_run_waiting_on_a_window_says_why_when_it_times_out():
    """15 tuples into tumbling windows of 10: a window's tuples are acked as they expire
    (the next window, or the end of input), which never comes while the spout waits
    for their acks. The timeout names the spout, what it has unacked, the windowed
    bolt and finish_input()."""

    class Sum(WindowedBolt):
        def execute_window(self, window):
            pass

    t = Topology("window-wait")
    t.set_spout("src", FinishWhenAcked())
    t.set_bolt("w", Sum().with_tumbling_window(Count(10))).shuffle_grouping("src")
    with LocalCluster() as c:
        c.submit(t)
        with pytest.raises(TimeoutError) as caught:
            c.wait_complete("window-wait", timeout=3)
    said = str(caught.value)
    assert re.search(r"spouts src \(\d+ tuples unacked\) have not ended their input", said), said
    assert "windowed bolts (w)" in said and "finish_input()" in said, said
