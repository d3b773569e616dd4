"""The per-peer outbox of a worker link (transport/peers.py), as scenarios: what waits,
what is held, what is dropped, as a peer's connection comes, goes and moves."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.transport.peers import (
    CONNECTING,
    CONTROL_BACKLOG,
    DOWN,
    UP,
    Outbox,
    by_source,
)
from stormish.transport.remote import RemoteTarget, TransferQueue


def batches(src: int, *sizes: int) -> list[tuple]:
    """Batches as the transfer queue holds them: (dest, src, stream, values, metas)."""
    return [(9, src, "default", [(i,) for i in range(n)], None) for n in sizes]


def test_tuples_wait_for_the_connection_and_hold_the_peer_when_too_many():
    box = Outbox(2, hold_at=4)
    assert box.state == CONNECTING and not box.sendable()
    for i in range(3):
        assert box.put([b"m%d" % i], batches(1, 10), 10) == []
    assert not box.held and box.tuples == 30
    box.put([b"m3"], batches(1, 10), 10)
    assert box.held  # 4 batches wait: the peer's tasks are under backpressure here
    box.connected()
    assert box.state == UP and box.sendable()
    assert box.sent()[0] == [b"m0"]
    assert box.held  # released only at half (hysteresis)
    box.sent()
    assert not box.held and box.n_batches == 2 and box.tuples == 20


def test_a_lost_connection_drops_what_waits_and_what_comes_until_it_is_back():
    box = Outbox(1, hold_at=2)
    box.connected()
    box.put([b"a"], batches(3, 5), 5)
    box.put([b"b"], batches(4, 7), 7)
    assert box.held
    lost = box.disconnected()  # dropped: their trees fail and replay
    assert by_source(lost) == (12, {3: 5, 4: 7})
    assert box.state == DOWN and not box.held and not box.data
    late = box.put([b"c"], batches(3, 4, 5), 9)  # dropped as it comes: nobody is parked
    assert by_source(late) == (9, {3: 9}) and not box.held
    assert box.put_control([b"status"])  # control waits for the connection
    box.connected()
    assert box.put([b"d"], batches(3, 1), 1) == [] and box.tuples == 1


def test_a_move_clears_the_outbox():
    box = Outbox(1, hold_at=8)
    box.put([b"a"], batches(1, 50, 50), 100)
    box.put([b"b"], batches(2, 50), 50)
    assert by_source(box.clear()) == (150, {1: 100, 2: 50})
    assert not box.waiting() and box.n_batches == 0


def test_the_control_backlog_is_bounded_oldest_first():
    box = Outbox(1, hold_at=8)
    for i in range(CONTROL_BACKLOG):
        assert box.put_control([i])
    assert not box.put_control(["newest"])
    assert len(box.control) == CONTROL_BACKLOG
    assert box.control[0] == [1] and box.control[-1] == ["newest"]


def test_hold_at_must_be_positive():
    with pytest.raises(ValueError, match="hold_at"):
        Outbox(1, hold_at=0)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("put"), st.lists(st.integers(0, 20), min_size=1, max_size=3)),
            st.tuples(st.sampled_from(["send", "up", "down", "clear"])),
        ),
        max_size=60,
    ),
    st.integers(1, 6),
)
def test_every_tuple_is_sent_waiting_or_dropped(events, hold_at):
    """Whatever happens to the connection, no tuple is lost uncounted in the outbox, and
    the peer is held exactly by the hysteresis rule."""
    box = Outbox(0, hold_at)
    put = sent = dropped = 0
    for ev in events:
        if ev[0] == "put":
            put += sum(ev[1])
            dropped += by_source(box.put([b"x"], batches(1, *ev[1]), sum(ev[1])))[0]
        elif ev[0] == "send" and box.data and box.sendable():
            sent += box.sent()[2]
        elif ev[0] == "up":
            box.connected()
        elif ev[0] == "down":
            dropped += by_source(box.disconnected())[0]
        elif ev[0] == "clear":
            dropped += by_source(box.clear())[0]
        assert put == sent + dropped + box.tuples
        assert box.n_batches == sum(len(m[1]) for m in box.data)
        if box.n_batches >= hold_at:
            assert box.held
        if box.n_batches <= hold_at // 2:
            assert not box.held


def test_remote_target_refuses_for_a_held_worker_and_steers_away_from_a_down_one():
    tq = TransferQueue(10)
    held, down = set(), set()
    t = RemoteTarget(7, 1, tq, set(), held=held, down=down)
    held.add(1)
    assert not t.try_publish((1, "default", [(1,)], None), 1) and len(tq) == 0
    assert t.load() == 1.0
    held.clear()
    down.add(1)  # gone: accepted (the link drops and counts it), but shuffles avoid it
    assert t.try_publish((1, "default", [(1,)], None), 1)
    assert t.load() == 1.0
    down.clear()
    assert t.load() == 0.0
