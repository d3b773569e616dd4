"""The Kafka spout serves its partitions fairly (stormish.kafka.core.SpoutCore.take):
under topology.max.spout.pending, or behind a backlog, every assigned partition
progresses, not the first one in the assignment's order while it has records."""

from __future__ import annotations

from collections import Counter, deque

import pytest

from stormish.kafka.core import SpoutCore

TPS = [("t", p) for p in range(4)]


def backlog(tp: tuple[str, int], n: int, start: int = 0) -> list[tuple]:
    return [(tp[0], tp[1], o, None, b"v", 0) for o in range(start, start + n)]


def run_pending(core: SpoutCore, pending: int, rounds: int, acks_per_round: int) -> list[tuple]:
    """The spout's loop as spout.py drives it: take up to `pending` less what is in
    flight, then the topology completes the oldest trees (a slow bolt: a few a round)."""
    flying: deque = deque()
    taken: list[tuple] = []
    for _ in range(rounds):
        for r, mid in core.take(pending - core.trees_in_flight(), 0.0):
            flying.append(mid)
            taken.append(r if mid is None or len(mid) == 4 else r[0])
        for _ in range(min(acks_per_round, len(flying))):
            core.ack(flying.popleft())
    return taken


@pytest.mark.parametrize("acks_per_round", [1, 3, 7])
def test_every_partition_progresses_under_a_small_max_spout_pending(acks_per_round):
    core = SpoutCore()
    core.assigned(dict.fromkeys(TPS, 0))
    core.polled([r for tp in TPS for r in backlog(tp, 5000)])
    taken = run_pending(core, pending=100, rounds=400, acks_per_round=acks_per_round)
    per = Counter(r[1] for r in taken)
    # the first 100 went out at once, then each round's freed places round robin
    assert set(per) == {0, 1, 2, 3}
    assert max(per.values()) - min(per.values()) <= 1 + acks_per_round, per
    committed = core.commit_now(sync=True).offsets  # type: ignore[union-attr]
    assert min(committed.values()) > 0, committed
    # each partition's records still went out in offset order, without gaps
    for p in range(4):
        offsets = [r[2] for r in taken if r[1] == p]
        assert offsets == list(range(len(offsets)))


def test_a_limit_of_one_a_call_turns_round_the_partitions_with_records():
    core = SpoutCore()
    core.assigned(dict.fromkeys(TPS, 0))
    # partition 1 has nothing: the turn goes on to the next one that has records
    core.polled(backlog(TPS[0], 10) + backlog(TPS[2], 10) + backlog(TPS[3], 10))
    got = [core.take(1, 0.0)[0][0][1] for _ in range(9)]
    assert got == [0, 2, 3] * 3


def test_a_large_limit_is_shared_and_what_a_short_partition_leaves_goes_to_the_others():
    core = SpoutCore()
    core.assigned(dict.fromkeys(TPS, 0))
    core.polled(backlog(TPS[0], 100) + backlog(TPS[1], 2) + backlog(TPS[2], 100))
    per = Counter(r[1] for r, _ in core.take(40, 0.0))
    assert sum(per.values()) == 40 and per[1] == 2 and per[0] >= 10 and per[2] >= 10


def test_due_replays_and_trees_keep_their_order_under_the_round_robin():
    core = SpoutCore(records_per_tree=5)
    core.assigned(dict.fromkeys(TPS[:2], 0))
    core.polled(backlog(TPS[0], 50) + backlog(TPS[1], 50))
    first = core.take(2, 0.0)
    assert sorted(mid[1] for _, mid in first) == [0, 1]  # a tree of each partition
    failed = next(mid for _, mid in first if mid[1] == 0)
    core.fail(failed, now=0.0)  # its 5 records replay one by one, before later trees
    again = core.take(10, 1.0)
    p0 = [mid for _, mid in again if mid[1] == 0]
    assert [len(m) for m in p0[:5]] == [4] * 5 and [m[2] for m in p0[:5]] == [0, 1, 2, 3, 4]
    assert all(len(m) == 5 for m in p0[5:])
