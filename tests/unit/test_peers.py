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
    PeerQueue,
    by_source,
)
from stormish.transport.remote import RemoteTarget, TransferQueue


def batches(src: int, *sizes: int) -> list[tuple]:
    """Batches as the transfer queue holds them: (dest, src, stream, values, metas)."""
    return [(9, src, "default", [(i,) for i in range(n)], None) for n in sizes]


def send(box: PeerQueue, max_tuples: int = 1024) -> int:
    """What the transfer thread does when the socket takes one message."""
    if box.ready is None:
        box.ready = (["frames"], *box.take(max_tuples))
    return box.sent()


def test_tuples_wait_for_the_connection_and_hold_the_peer_when_too_many():
    box = PeerQueue(2, hold_at=4)
    assert box.state == CONNECTING and not box.sendable()
    for _ in range(3):
        assert box.put(batches(1, 10)) == []
    assert not box.held and box.n_batches == 3
    box.put(batches(1, 10))
    assert box.held  # 4 batches wait: the peer's tasks are under backpressure here
    assert not box.sendable()  # nothing goes to ZeroMQ before the connection is up
    box.connected()
    assert box.state == UP and box.sendable()
    assert send(box, max_tuples=10) == 10
    assert box.held  # released only at half (hysteresis)
    assert send(box, max_tuples=10) == 10
    assert not box.held and box.n_batches == 2


def test_a_message_takes_whole_batches_up_to_the_limit():
    box = PeerQueue(1, hold_at=100)
    box.connected()
    box.put(batches(1, 400, 400, 400, 2000, 10))
    sizes = [([len(b[3]) for b in part], n) for part, n in (box.take(1024) for _ in "1234")]
    # whole batches; a bigger batch goes alone
    assert sizes == [([400, 400], 800), ([400], 400), ([2000], 2000), ([10], 10)]
    assert not box.data and box.n_batches == 5  # counted until sent


def test_a_lost_connection_holds_what_waits_and_what_comes_until_it_is_back():
    """The peer is taken as restarting: nothing is dropped, and nobody is parked."""
    box = PeerQueue(1, hold_at=2)
    box.connected()
    box.put(batches(3, 5))
    box.ready = (["encoded, the socket was full"], *box.take(1024))
    box.put(batches(4, 7))
    assert box.held
    assert box.disconnected(now=10.0) == []
    assert box.state == DOWN and not box.held and box.n_batches == 2
    assert box.put(batches(3, 4, 5)) == [] and not box.held  # held, in order
    assert box.put_control([b"status"])  # control waits for the connection
    assert not box.sendable()
    box.connected()
    assert box.held  # 5 batches wait for a peer that is up: backpressure again
    sent = []
    while box.sendable():
        box.ready = (["frames"], *box.take(6))
        sent += [(b[1], len(b[3])) for b in box.ready[1]]
        box.sent()
    assert sent == [(3, 5), (4, 7), (3, 4), (3, 5)]
    assert box.held_while_down == 21 and box.down_held == 0


def test_what_is_held_for_a_down_peer_is_bounded_in_tuples():
    box = PeerQueue(1, hold_at=100, down_tuples=10)
    box.connected()
    box.put(batches(1, 4))
    assert box.disconnected(now=0.0) == []
    dropped = box.put(batches(2, 4, 3, 1))  # 4 + 4 held; 3 is past the bound, and after
    assert by_source(dropped) == (4, {2: 4}) and box.n_batches == 2
    assert by_source(box.put(batches(2, 2))) == (0, {})  # room for 2 is left
    assert by_source(box.put(batches(2, 1))) == (1, {2: 1})


def test_what_is_held_for_a_down_peer_is_bounded_in_the_bytes_of_its_buffers():
    """100,000 tuples of 256 KiB held 25 GiB for a peer that was down (found by a bug
    hunt; Storm's client drops while the connection is down): the buffers' bytes are
    bounded too, and what is past it is dropped, counted."""
    import numpy as np

    box = PeerQueue(1, hold_at=100, down_tuples=1000, down_bytes=3 << 20)
    box.connected()
    assert box.disconnected(now=0.0) == []
    mib = [(np.zeros(1 << 17),), (bytes(1 << 20),)]  # an array and bytes of 1 MiB
    held = box.put([(9, 0, "default", mib, None)])
    assert held == [] and box.down_held_bytes == 2 << 20
    dropped = box.put([(9, 0, "default", list(mib), None), (9, 0, "default", [("x",)], None)])
    assert len(dropped) == 2 and box.down_held == 2  # past 3 MiB: it and what follows
    box.connected()
    assert box.down_held_bytes == 0


def test_a_peer_down_past_the_message_timeout_is_taken_as_gone():
    """What it held is dropped (its trees have timed out by now) and so is what comes,
    until the connection is back."""
    box = PeerQueue(1, hold_at=100, down_secs=30.0)
    box.connected()
    box.disconnected(now=100.0)
    box.put(batches(1, 5))
    assert box.expire(now=130.0) == []  # not past it yet
    assert by_source(box.expire(now=130.5)) == (5, {1: 5})
    assert by_source(box.put(batches(1, 2))) == (2, {1: 2}) and not box.waiting()
    box.connected()
    assert box.put(batches(1, 2)) == [] and box.n_batches == 1


def test_a_move_clears_the_outbox():
    box = PeerQueue(1, hold_at=8)
    box.put(batches(1, 50, 50))
    box.put(batches(2, 50))
    assert by_source(box.clear()) == (150, {1: 100, 2: 50})
    assert not box.waiting() and box.n_batches == 0


def test_the_control_backlog_is_bounded_oldest_first():
    box = PeerQueue(1, hold_at=8)
    for i in range(CONTROL_BACKLOG):
        assert box.put_control([i])
    assert not box.put_control(["newest"])
    assert len(box.control) == CONTROL_BACKLOG
    assert box.control[0] == [1] and box.control[-1] == ["newest"]


def test_hold_at_must_be_positive():
    with pytest.raises(ValueError, match="hold_at"):
        PeerQueue(1, hold_at=0)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("put"), st.lists(st.integers(0, 20), min_size=1, max_size=3)),
            st.tuples(st.sampled_from(["send", "encode", "up", "down", "expire", "clear"])),
        ),
        max_size=60,
    ),
    st.integers(1, 6),
    st.integers(1, 30),
)
def test_every_tuple_is_sent_waiting_or_dropped_in_order(events, hold_at, max_tuples):
    """Whatever happens to the connection, no tuple is lost uncounted in the outbox,
    what is sent keeps its order, and the peer is held exactly by the hysteresis rule."""
    box = PeerQueue(0, hold_at, down_tuples=40)
    put, sent, dropped = [], [], 0
    for ev in events:
        if ev[0] == "put":
            new = batches(1, *ev[1])
            put += new
            dropped += by_source(box.put(new))[0]
        elif ev[0] == "encode" and box.sendable() and box.ready is None:
            box.ready = (["frames"], *box.take(max_tuples))  # the socket was full
        elif ev[0] == "send" and box.sendable():
            if box.ready is None:
                box.ready = (["frames"], *box.take(max_tuples))
            part = box.ready[1]
            sent += part
            assert box.sent() == by_source(part)[0]
        elif ev[0] == "up":
            box.connected()
        elif ev[0] == "down":
            dropped += by_source(box.disconnected())[0]
        elif ev[0] == "expire":
            dropped += by_source(box.expire(1e9))[0]
        elif ev[0] == "clear":
            dropped += by_source(box.clear())[0]
        waiting = [*(box.ready[1] if box.ready else ()), *box.data]
        assert by_source(put)[0] == by_source(sent)[0] + dropped + by_source(waiting)[0]
        assert box.n_batches == len(waiting)
        order = {id(b): i for i, b in enumerate(put)}
        assert [order[id(b)] for b in sent] == sorted(order[id(b)] for b in sent)
        if box.state == DOWN:
            assert not box.held  # a down peer parks nobody
            assert box.down_held <= 40
        elif box.n_batches >= hold_at:
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
