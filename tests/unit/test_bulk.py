"""Sealed large buffers on a bulk socket (transport/bulk.py): real ZeroMQ sockets on
127.0.0.1 in one process, a sender and a receiver as two workers' link sides use them."""

from __future__ import annotations

import os
import pickle
import time

import numpy as np
import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.transport import bulk
from stormish.transport import frames as fr
from stormish.transport.security import Curve

SENDER, RECEIVER = 3, 5
SECURITY = Curve.ephemeral()  # the ZAP handler of a link's context checks the token


def end(ctx: zmq.Context) -> None:
    SECURITY.release(ctx)
    ctx.term()


@pytest.fixture
def pair():
    ctx = zmq.Context()
    out = bulk.Sender(ctx, SENDER, 64 * 1024)
    into = bulk.Receiver(
        ctx,
        "127.0.0.1",
        RECEIVER,
        SECURITY,
        peers=(SENDER, RECEIVER + 1),
        sealed_bytes=1 << 20,
    )
    into.keyed(SENDER, out.announce())
    out.want(RECEIVER, into.address, into.announce())
    out.apply()
    try:
        yield out, into
    finally:
        out.close()
        into.close()
        end(ctx)


@pytest.fixture
def evil(pair):
    """A PUSH socket given the receiver's token (a worker of the run, or a sniffer of
    PLAIN's password) but no sender's key, connected to the receiver's bulk port."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.plain_username, sock.plain_password = b"evil", pair[1].announce().encode()
    sock.connect(pair[1].address)
    try:
        yield sock
    finally:
        sock.close(0)
        ctx.term()


def one_arrives_whole(out, into):
    sent = arrays(1)
    msg = fr.decode(seal_when_connected(out, message(sent), 1))
    opened = into.open(SENDER, msg.body.first, msg.body.count)
    assert np.array_equal(np.frombuffer(opened[0]), sent[0])


def message(arrays, seq=1):
    batch = [(9, 1, "default", [(a,) for a in arrays], None)]
    return fr.encode_tuples(SENDER, seq, batch)


def seal_when_connected(out, frames, tuples, peer=RECEIVER):
    """ZMQ_IMMEDIATE: until the bulk connection is up the sender waits (None)."""
    deadline = time.monotonic() + 10
    while True:
        sealed = out.seal(peer, frames, tuples)
        if sealed is not None or time.monotonic() > deadline:
            return sealed
        out._sock[peer][1].poll(100, zmq.POLLOUT)


def arrays(n, size=65536):
    return [np.full(size // 8, i, dtype=np.float64) for i in range(n)]


def test_buffers_go_sealed_and_come_back_whole(pair):
    out, into = pair
    sent = arrays(3)
    frames = message(sent)
    sealed = seal_when_connected(out, frames, 3)
    assert sealed is not frames and len(sealed) == 3
    msg = fr.decode(sealed)
    assert msg.kind == fr.Kind.BULK_TUPLES and (msg.body.first, msg.body.count) == (0, 3)
    assert msg.body.tuples == 3
    opened = into.open(SENDER, msg.body.first, msg.body.count)
    batches = fr.load_tuples(msg.body.pickle, opened, fr.Kind.BULK_TUPLES)
    got = [row[0] for row in batches[0][3]]
    assert all(np.array_equal(a, b) for a, b in zip(got, sent, strict=True))
    assert into.received == 1 and out.messages == 1
    # the next message's counters follow on: a nonce is never used twice under a key
    msg2 = fr.decode(seal_when_connected(out, message(arrays(2), seq=2), 2))
    assert msg2.body.first == 3


def test_the_sealed_bytes_on_the_wire_are_not_the_buffers(pair):
    out, into = pair
    secret = os.urandom(65536)
    frames = fr.encode_tuples(SENDER, 1, [(9, 1, "default", [(secret,)], None)])
    seal_when_connected(out, frames, 1)
    assert into.pull.poll(5000)
    parts = into.pull.recv_multipart()
    assert secret not in b"".join(parts)
    assert fr.bulk_head(parts) == (SENDER, 0)


def test_a_forged_buffer_at_the_named_counter_is_dropped_and_the_real_one_used(pair, evil):
    out, into = pair
    # the attacker knows the counter (0) but not the key: its tag fails
    evil.send_multipart([fr.bulk_header(SENDER, 0), os.urandom(65536 + 16)])
    deadline = time.monotonic() + 10
    while not into.read() and time.monotonic() < deadline:
        into.pull.poll(100)
    one_arrives_whole(out, into)
    assert into.forged == 1


def test_garbage_on_the_bulk_port_is_counted_and_harms_nothing(pair, evil):
    out, into = pair
    evil.send_multipart([b"hello", b"world"])
    evil.send(b"x")
    evil.send_multipart([fr._header(fr.Kind.TUPLES, SENDER, 0), pickle.dumps([])])
    deadline = time.monotonic() + 10
    while into.forged < 3 and time.monotonic() < deadline:
        into.pull.poll(100)
        into.read()
    assert into.forged == 3
    one_arrives_whole(out, into)


def test_missing_buffers_raise_after_the_wait_and_later_ones_do_not_wait(pair):
    _, into = pair
    t0 = time.monotonic()
    with pytest.raises(bulk.BulkError, match="missing"):
        into.open(SENDER, 7, 1, wait=0.2)
    assert time.monotonic() - t0 >= 0.2
    t1 = time.monotonic()
    with pytest.raises(bulk.BulkError):
        into.open(SENDER, 8, 1, wait=5)  # the same sender, lost just now: no second wait
    assert time.monotonic() - t1 < 1
    assert into.missing == 2


def test_buffers_from_a_sender_without_a_key_are_refused(pair):
    _, into = pair
    with pytest.raises(bulk.BulkError, match="before its key"):
        into.open(SENDER + 1, 0, 1)


def test_a_new_key_forgets_what_was_sealed_under_the_old_one(pair):
    out, into = pair
    frames = message(arrays(1))
    msg = fr.decode(seal_when_connected(out, frames, 1))
    deadline = time.monotonic() + 10
    while not into.read() and time.monotonic() < deadline:
        into.pull.poll(100)
    into.keyed(SENDER, os.urandom(32).hex())  # the sender restarted
    with pytest.raises(bulk.BulkError):
        into.open(SENDER, msg.body.first, 1, wait=0.1)


def test_what_comes_before_a_key_is_kept_only_for_a_peer_and_bounded_in_bytes(pair, evil):
    """The bulk socket has no CURVE: a process without keys made up 64 senders and parked
    512 MiB in a worker, counted nowhere (found by a bug hunt). Only a worker of the
    assignment is waited for, and what it sends ahead of its key is bounded in bytes."""
    _, into = pair
    frame = b"\xa5" * (256 * 1024)
    for sender in (100, 101, RECEIVER + 1):  # two strangers, and a peer with no key yet
        for i in range(8):
            evil.send_multipart([fr.bulk_header(sender, i), frame, frame])
    deadline = time.monotonic() + 10
    while into.forged + into.overrun + sum(map(len, into._sealed.values())) < 24:
        assert time.monotonic() < deadline, (into.forged, into.overrun)
        into.pull.poll(100)
        into.read()
    assert into.forged == 16 and set(into._sealed) == {RECEIVER + 1}
    kept = sum(len(p) for _, parts in into._sealed[RECEIVER + 1] for p in parts)
    held = len(into._sealed[RECEIVER + 1])  # the newest of the peer's 8 that fit in 1 MiB
    assert kept <= 1 << 20 and held >= 1 and into.overrun == 8 - held


def test_a_key_that_is_not_one_is_refused(pair):
    _, into = pair
    for key in (None, 5, "zz" * 32, "ab" * 16):
        assert not into.keyed(SENDER, key)


def test_with_no_bulk_socket_for_the_peer_the_link_takes_the_buffers():
    ctx = zmq.Context()
    out = bulk.Sender(ctx, SENDER, 64 * 1024)
    try:
        frames = message(arrays(1))
        assert out.seal(RECEIVER, frames, 1) is frames
        # a bulk socket that never connects (nobody listens): the link takes them too
        with socket_nobody_listens() as address:
            out.want(RECEIVER, address, "ab" * bulk.TOKEN_BYTES)
            out.apply()
            first = out.seal(RECEIVER, frames, 1)
            assert first is None  # no room: wait (held) ...
            out._full_since[RECEIVER] -= bulk.STALL  # ... for STALL
            assert out.seal(RECEIVER, frames, 1) is frames
            assert out.fallback == 1
    finally:
        out.close()
        ctx.term()


class socket_nobody_listens:  # noqa: N801 - a context manager used as a function
    def __enter__(self) -> str:
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()  # nobody listens on this port now
        return f"tcp://127.0.0.1:{self.port}"

    def __exit__(self, *exc) -> None:
        return None


def test_a_buffer_sealed_for_another_receiver_does_not_open_here(pair):
    """The nonce holds the receiver's index: bytes sealed for worker 6 at counter 0 are
    not worker 5's counter 0."""
    out, into = pair
    other = bulk.Receiver(out.ctx, "127.0.0.1", RECEIVER + 1, SECURITY)
    try:
        other.keyed(SENDER, out.announce())
        out.want(RECEIVER + 1, other.address, other.announce())
        out.apply()
        assert seal_when_connected(out, message(arrays(1)), 1, peer=RECEIVER + 1)
        assert other.pull.poll(10_000)
        parts = other.pull.recv_multipart()  # what worker 6 got, replayed to worker 5
        other._keep(parts)
        assert other.open(SENDER, 0, 1, wait=0)  # it opens there ...
        into._keep(parts)
        assert into.forged == 1  # ... not here
        with pytest.raises(bulk.BulkError):
            into.open(SENDER, 0, 1, wait=0.05)
    finally:
        other.close()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 12), st.booleans()),  # (counter, forged?) as they arrive
        max_size=30,
    ),
    st.integers(0, 12),
)
def test_open_gives_the_sealed_bytes_of_the_named_counter_or_raises(arrivals, want):
    """Whatever arrives on the bulk port in whatever order, `open` returns the bytes the
    sender sealed under exactly that counter, or raises: never other bytes."""
    ctx = zmq.Context()
    out = bulk.Sender(ctx, SENDER, 64 * 1024)
    into = bulk.Receiver(ctx, "127.0.0.1", RECEIVER, SECURITY)
    try:
        into.keyed(SENDER, out.announce())
        for counter, forged in arrivals:
            plain = counter.to_bytes(2, "big") * 64
            aead = bulk._aead(os.urandom(32) if forged else out.key)
            sealed = aead.encrypt(bulk.NONCE.pack(RECEIVER, counter), plain, out._ad)
            into._keep([fr.bulk_header(SENDER, counter), sealed])
        try:
            got = into.open(SENDER, want, 1, wait=0)
        except bulk.BulkError:
            return
        assert got == [want.to_bytes(2, "big") * 64]
    finally:
        out.close()
        into.close()
        end(ctx)


def test_a_forged_frame_far_ahead_does_not_make_a_real_one_look_lost(pair):
    out, into = pair
    into._keep([fr.bulk_header(SENDER, 1000), os.urandom(65536 + 16)])
    assert into.forged == 1
    sent = arrays(1)
    msg = fr.decode(seal_when_connected(out, message(sent), 1))
    opened = into.open(SENDER, msg.body.first, 1)  # waits for it: nothing says it is lost
    assert np.array_equal(np.frombuffer(opened[0]), sent[0])


def test_buffers_that_come_before_their_senders_key_open_when_it_comes():
    ctx = zmq.Context()
    out = bulk.Sender(ctx, SENDER, 64 * 1024)
    into = bulk.Receiver(ctx, "127.0.0.1", RECEIVER, SECURITY, peers=(SENDER,))
    try:
        out.want(RECEIVER, into.address, into.announce())
        out.apply()
        sent = arrays(2)
        msg = fr.decode(seal_when_connected(out, message(sent), 2))
        assert into.pull.poll(10_000)
        into.read()  # the sender's HELLO (its key) is still on its way
        with pytest.raises(bulk.BulkError, match="before its key"):
            into.open(SENDER, 0, 2, wait=0)
        into.keyed(SENDER, out.announce())
        opened = into.open(SENDER, msg.body.first, 2)
        assert [np.frombuffer(b)[0] for b in opened] == [0.0, 1.0]
    finally:
        out.close()
        into.close()
        end(ctx)


def test_a_recycled_buffer_is_never_lent_while_anything_refers_to_it():
    bufs = bulk.Recycler()
    a = bufs.take(1024)
    view = np.frombuffer(memoryview(a), dtype=np.uint8)  # an array unpickled over it
    a_id = id(a)
    del a
    bufs.collect()
    b = bufs.take(1024)
    assert id(b) != a_id  # still in use by `view`: a new buffer
    del view
    bufs.collect()
    c = bufs.take(1024)
    assert id(c) == a_id  # nothing refers to it any more: used again
    assert bufs.take(2048) is not c and len(bufs.take(7)) == 7  # sized exactly


def test_the_recycler_keeps_a_bounded_number_of_free_bytes():
    bufs = bulk.Recycler(keep_bytes=4096)
    for _ in range(10):
        bufs.take(1024)
    bufs.collect()
    assert bufs._free_bytes == 4096 and len(bufs._free[1024]) == 4


def test_opened_arrays_stay_whole_while_later_messages_reuse_buffers(pair):
    """Arrays a bolt keeps are never overwritten by buffers of later messages."""
    out, into = pair
    kept = []
    for seq in range(1, 6):
        sent = [np.full(8192, seq * 10 + i, dtype=np.float64) for i in range(3)]
        msg = fr.decode(seal_when_connected(out, message(sent, seq), 3))
        opened = into.open(SENDER, msg.body.first, msg.body.count)
        batches = fr.load_tuples(msg.body.pickle, opened, fr.Kind.BULK_TUPLES)
        del opened
        arrays_ = [row[0] for row in batches[0][3]]
        kept.append(arrays_[0])  # keeps one, drops the others
    for seq, a in enumerate(kept, start=1):
        assert (a == seq * 10).all()


def test_free_buffers_go_once_none_was_taken_for_a_while():
    bufs = bulk.Recycler()
    for _ in range(3):
        bufs.take(1024)
    bufs.collect()
    assert bufs._free_bytes == 3072
    bufs.idle(time.monotonic())  # just taken: kept
    assert bufs._free_bytes == 3072
    bufs.idle(time.monotonic() + bulk.Recycler.IDLE + 1)
    assert bufs._free_bytes == 0 and not bufs._free
