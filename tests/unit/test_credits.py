"""The credit ledger of `fail` edges between workers (runtime/credits.py), sans I/O: a
real channel and queue at the receiver, the senders' credits, and a network model in
between (batches in order per sender, grants that may be lost, repeated or late).
A tuple sent on credit is never rejected where it arrives, the channel never holds more
than its capacity, and credit comes back as the task consumes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.edges import make_policy
from stormish.runtime.channel import EdgeChannel, EdgeStats
from stormish.runtime.credits import (
    ReceiverCredits,
    Reports,
    SenderCredit,
    WorkerCredits,
    initial_credits,
    share_of,
)
from stormish.runtime.queue import ReceiveQueue
from stormish.tuple import RejectedRows

LOCAL = 0  # a sender in the receiver's own worker (it reserves in the channel)


def receiver(capacity: int, remote: list[int]) -> tuple[ReceiveQueue, EdgeChannel]:
    policy = make_policy("test", overflow="fail", capacity=capacity)
    assert policy is not None
    q = ReceiveQueue(1024)
    ch = EdgeChannel(policy, EdgeStats("src", "default", 9, policy), capacity)
    srcs = [LOCAL, *remote]
    q.add_channel([(s, "default") for s in srcs], ch)
    ch.credits = ReceiverCredits(initial_credits(capacity, srcs, remote), share_of(capacity, srcs))
    ch.reserved += ch.credits.start(ch.reserved_by)
    return q, ch


def test_initial_credits_share_the_channel_and_never_exceed_it():
    assert initial_credits(25, [1], [1]) == {1: 25}
    assert initial_credits(25, [1, 2, 3], [2, 3]) == {2: 8, 3: 8}
    assert initial_credits(2, [1, 2, 3, 4], [1, 2, 3, 4]) == {1: 1, 2: 1, 3: 0, 4: 0}
    assert share_of(2, [1, 2, 3, 4]) == 1


def test_a_sender_that_starts_with_no_credit_gets_some_as_room_frees():
    """More senders than room: the last start with none, and are topped up later."""
    q, ch = receiver(2, [1, 2, 3])  # a local sender too: 4 senders, room for 2
    assert ch.reserved_by == {1: 1, 2: 1, 3: 0}
    q.publish_remote((1, "default", [(0,)], None), 1)
    q.publish_remote((2, "default", [(0,)], None), 1)
    q.consume()
    assert dict(q.top_up(ch)) == {1: 2, 2: 2}  # the room freed, in order
    q.publish_remote((1, "default", [(0,)], None), 1)
    q.consume()
    assert dict(q.top_up(ch)) == {3: 1}  # room short for all goes round: 3's turn


ops = st.lists(
    st.one_of(
        st.tuples(st.just("emit"), st.integers(0, 2), st.integers(1, 6)),
        st.tuples(st.just("deliver"), st.integers(1, 2)),
        st.tuples(st.just("consume"), st.integers(1, 8)),
        st.tuples(st.just("top_up")),
        st.tuples(st.just("grant"), st.integers(1, 2), st.sampled_from(["give", "lose", "twice"])),
    ),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(capacity=st.integers(1, 30), ops=ops)
def test_what_credit_paid_for_is_never_rejected_and_credit_comes_back(capacity, ops):
    remote = [1, 2]
    q, ch = receiver(capacity, remote)
    first = initial_credits(capacity, [LOCAL, *remote], remote)
    reports = Reports()
    credit = {s: SenderCredit(None, 9, 1, s, "default", first[s], reports) for s in remote}
    wire: dict[int, list[int]] = {s: [] for s in remote}  # batches in flight, in order
    back: dict[int, list[int]] = {s: [] for s in remote}  # grants in flight
    consumed = 0
    for op in [*ops, ("drain",)]:
        if op[0] == "emit":
            _, s, k = op
            if s == LOCAL:
                if q.reserve(ch, LOCAL, k):
                    assert q.try_publish((LOCAL, "default", [(0,)] * k, None), k)
            elif credit[s].reserve(s, k):
                wire[s].append(k)
        elif op[0] == "deliver":
            s = op[1]
            if wire[s]:
                k = wire[s].pop(0)
                before = ch.stats.rejected
                q.publish_remote((s, "default", [(0,)] * k, None), k)
                assert ch.stats.rejected == before, "a tuple sent on credit was rejected"
        elif op[0] == "consume":
            got = q.consume()
            consumed += sum(len(b[2]) for b in got or [])
        elif op[0] == "top_up":
            for s, total in q.top_up(ch):
                back[s].append(total)
        elif op[0] == "grant":
            _, s, how = op
            if back[s]:
                total = back[s].pop(0)
                if how != "lose":
                    credit[s].grant("r1", total)
                if how == "twice":
                    credit[s].grant("r1", total)
        else:  # everything arrives and is consumed; the totals are sent again (the
            # link's timer does, for lost grants) and get through
            for s in remote:
                for k in wire[s]:
                    q.publish_remote((s, "default", [(0,)] * k, None), k)
                wire[s] = []
            while (got := q.consume()) is not None:
                consumed += sum(len(b[2]) for b in got)
            q.top_up(ch)
            for s, total in q.totals(ch, remote):
                credit[s].grant("r1", total)
        # the room set aside covers what each sender may still send, and no more than
        # the channel holds is ever promised
        assert ch.size + ch.reserved <= capacity
        assert ch.stats.rejected == 0
        for s in remote:
            in_flight = sum(wire[s])
            assert credit[s].room() + in_flight <= ch.reserved_by.get(s, 0)
    # drained: every sender holds its whole share again (nothing leaked)
    assert ch.size == 0
    for s in remote:
        assert credit[s].room() == ch.reserved_by[s] == first[s]
    assert consumed == ch.stats.arrived


def test_a_restarted_sender_starts_from_its_share_and_old_grants_are_ignored():
    q, ch = receiver(10, [1])  # a local sender and one remote: a share of 5 each
    credit = SenderCredit(None, 9, 1, 1, "default", 5, Reports())
    assert credit.reserve(1, 5) and not credit.reserve(1, 1)
    q.publish_remote((1, "default", [(0,)] * 2, None), 2)  # 3 lost with the sender
    assert ch.reserved_by[1] == 3 and ch.size == 2
    # its new incarnation starts from the initial grant; the receiver releases the 3
    assert q.restart_senders(ch, [1]) == [(1, 5)]
    assert ch.reserved == 5
    new = SenderCredit(None, 9, 1, 1, "default", 5, Reports())
    new.meet("r1")
    assert not new.grant("r0", 99)  # from a former incarnation of the receiver
    assert new.room() == 5


def test_a_restarted_receiver_resets_what_the_sender_spent():
    credit = SenderCredit(None, 9, 1, 1, "default", 5, Reports())
    credit.meet("r1")
    assert credit.reserve(1, 5) and credit.room() == 0
    credit.restart("r2")
    assert credit.room() == 5
    assert not credit.grant("r1", 50) and credit.grant("r2", 7) and credit.room() == 7


def test_rejections_are_kept_merged_until_the_link_takes_them():
    reports = Reports()
    woken = []
    reports.wake = lambda: woken.append(1)
    c = SenderCredit(None, 9, 1, 3, "default", 0, reports)
    c.reject((3, "default", [(1,), (2,)], None), 2, 2)
    c.reject((3, "default", [(3,)], [[(7, 1)]]), 1, 1)
    assert woken == [1]  # told once, until taken
    ((worker, item),) = reports.take()
    dest, src, stream, values, metas = item
    assert (worker, dest, src, stream) == (1, 9, 3, "default")
    assert type(values) is RejectedRows and values == [(1,), (2,), (3,)]
    assert values.withheld == 3 and metas == [None, None, [(7, 1)]]
    assert reports.take() == []


def test_a_report_is_counted_at_the_edge_as_a_local_rejection_is():
    q, ch = receiver(4, [1])
    rows = RejectedRows([(1,), (2,)], 4)
    q.publish_remote((1, "default", rows, [[(5, 1)], None]), 2)
    st_ = ch.stats
    assert (st_.arrived, st_.rejected, ch.size) == (2, 2, 0)
    assert st_.last_what is not None and "(4 deliveries to other edges withheld)" in st_.last_what
    assert ch.lost  # its trees fail at the task's next turn


def test_a_worker_resyncs_credits_on_a_new_connection():
    q, ch = receiver(8, [1])
    wc = WorkerCredits()
    wc.inbound.append((q, ch, {1: 1}))
    out = SenderCredit(None, 5, 1, 2, "default", 3, wc.reports)
    wc.outbound[(5, 2)] = out
    q.publish_remote((1, "default", [(0,)] * 3, None), 3)
    q.consume()
    assert wc.dirty() and wc.top_up() == {1: [[9, 1, 7]]}  # a share of 4, 3 back
    assert not wc.dirty()
    # the same incarnation on a new connection: the totals again, nothing reset
    assert wc.hello(1, "w1", new=False, restarted=False) == [[9, 1, 7]]
    assert out.peer == "w1"
    assert out.reserve(2, 3)
    # a new incarnation: its senders start over, and so do our credits with it
    assert wc.hello(1, "w1b", new=True, restarted=True) == [[9, 1, 4]]
    assert out.room() == 3 and out.peer == "w1b"
    assert wc.grant(1, "w1b", [[5, 2, 6], [7, 7, 1]]) == 1 and out.room() == 6
