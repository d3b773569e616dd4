"""stormish.testing.MemoryLog: the consumer-group contract a KafkaSpout relies on,
driven by hand (subscribe, poll, commit, pause, rebalance)."""

from __future__ import annotations

import pytest

from stormish.testing import MemoryLog


@pytest.fixture
def log():
    with MemoryLog("unit-memory-log") as log:
        log.create_topic("t", 2)
        yield log


def member(log, group="g", starts=None):
    c = log.consumer(group)
    calls = []

    def on_assign(tps):
        calls.append(("assign", sorted(tps)))
        return dict(starts or {})

    c.subscribe(["t"], None, on_assign, lambda tps: calls.append(("revoke", sorted(tps))))
    return c, calls


def test_produce_assigns_offsets_per_partition_and_by_key(log):
    assert [log.produce("t", b"a", partition=0) for _ in range(3)] == [0, 1, 2]
    log.produce("t", b"k1", key=b"same")
    log.produce("t", b"k2", key=b"same")
    by_key = [[r[4] for r in log.records("t", p) if r[3] == b"same"] for p in (0, 1)]
    assert sorted(by_key) == [[], [b"k1", b"k2"]]  # one key, one partition, in order
    with pytest.raises(KeyError, match="no topic 'nope'"):
        log.produce("nope", b"x")
    with pytest.raises(ValueError, match="no partition 5"):
        log.produce("t", b"x", partition=5)


def test_a_lone_member_gets_everything_and_reads_from_the_committed_position(log):
    for i in range(4):
        log.produce("t", str(i).encode(), partition=0)
    c, calls = member(log)
    c.poll(0, 0)  # the rebalance callbacks run first
    assert calls == [("assign", [("t", 0), ("t", 1)])]
    got = c.poll(10, 0)
    assert [r[2] for r in got] == [0, 1, 2, 3]
    assert c.commit({("t", 0): 2}, sync=True, metadata="stormish:x")
    assert log.committed("g", "t", 0) == 2
    assert c.committed([("t", 0), ("t", 1)]) == {("t", 0): (2, "stormish:x"), ("t", 1): None}
    assert c.high_watermarks([("t", 0)]) == {("t", 0): 4}


def test_a_paused_partition_gives_nothing_until_resumed(log):
    c, _ = member(log)
    c.poll(10, 0)
    c.pause([("t", 0)])
    log.produce("t", b"x", partition=0)
    assert c.poll(10, 0) == []
    c.resume([("t", 0)])
    assert [r[4] for r in c.poll(10, 0)] == [b"x"]


def test_a_pause_outlives_a_revoke_as_librdkafkas_does(log):
    # confluent-kafka 2.16 (librdkafka 2.16): a partition paused, revoked and assigned
    # back to the same consumer (eager) is still paused until resumed
    c, calls = member(log)
    c.poll(0, 0)
    c.pause([("t", 0)])
    log.produce("t", b"a", partition=0)
    other = log.consumer("g")
    other.subscribe(["elsewhere"], None, lambda tps: {}, lambda tps: None)
    c.poll(0, 0)  # c revokes
    other.poll(0, 0)  # other joins: the assignment is made
    c.poll(0, 0)
    assert calls[-2:] == [("revoke", [("t", 0), ("t", 1)]), ("assign", [("t", 0), ("t", 1)])]
    assert c.poll(10, 0) == []
    c.resume([("t", 0)])
    assert [r[4] for r in c.poll(10, 0)] == [b"a"]


def test_a_join_revokes_everything_then_splits_and_the_next_owner_resumes(log):
    for i in range(6):
        log.produce("t", str(i).encode(), partition=i % 2)
    a, a_calls = member(log)
    a.poll(0, 0)
    assert len(a.poll(100, 0)) == 6
    assert a.commit({("t", 0): 3, ("t", 1): 1}, sync=True)
    b, b_calls = member(log)
    a.poll(0, 0)  # a revokes; the group waits for b
    assert a_calls[-1] == ("revoke", [("t", 0), ("t", 1)])
    assert a.owned == []
    b.poll(0, 0)  # b joins: the assignment is made
    a.poll(0, 0)
    assert sorted(a.owned + b.owned) == [("t", 0), ("t", 1)] and a.owned and b.owned
    owner_of_1 = a if ("t", 1) in a.owned else b
    assert [r[2] for r in owner_of_1.poll(10, 0) if r[1] == 1] == [1, 2]  # from the commit
    assert not a.commit({("t", 9): 0}, sync=True)  # not its partition
    assert log.rejected_commits == 1


def test_close_revokes_and_leaves(log):
    a, a_calls = member(log)
    b, b_calls = member(log)
    for c in (a, b, a, b):
        c.poll(1, 0)
    b_had = sorted(b.owned)
    assert b_had
    b.close()
    assert b_calls[-1] == ("revoke", b_had)
    a.poll(1, 0)  # a revokes (eager), is alone, and is given everything
    a.poll(1, 0)
    assert sorted(a.owned) == [("t", 0), ("t", 1)]


def test_a_second_log_of_one_name_is_refused(log):
    with pytest.raises(ValueError, match="exists already"):
        MemoryLog("unit-memory-log")
