"""A bulk message larger than a receiver keeps ahead of its sender's key
(transport/bulk.py `PRE_KEY_BYTES`): found by a review, confirmed here. One tuple with a
buffer past 64 MiB made such a message; read before the sender's HELLO (its key) it was
counted forged and dropped, its tuple lost until its tree replayed. Such a message now
takes the CURVE link; what may go sealed still opens when it came before the key, and the
bound on what a process without keys can park is unchanged."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
import zmq

from stormish.transport import bulk
from stormish.transport import frames as fr
from stormish.transport.security import Curve

pytestmark = pytest.mark.timeout(60)

SENDER, RECEIVER, OTHER = 3, 5, 7
SECURITY = Curve.ephemeral()  # the ZAP handler of a link's context checks the token


def message(arrays: list[Any]) -> list:
    return fr.encode_tuples(SENDER, 1, [(9, 1, "default", [(a,) for a in arrays], None)])


def connected(out: bulk.Sender, frames: list, tuples: int) -> list:
    deadline = time.monotonic() + 10
    while True:
        sealed = out.seal(RECEIVER, frames, tuples)
        if sealed is not None:
            return sealed
        assert time.monotonic() < deadline, "no bulk connection"
        out._sock[RECEIVER][1].poll(100, zmq.POLLOUT)


@pytest.fixture
def pair(monkeypatch):
    """A sender and a receiver (keys not exchanged yet) with a 1 MiB pre-key budget."""
    monkeypatch.setattr(bulk, "PRE_KEY_BYTES", 1 << 20, raising=False)
    ctx = zmq.Context()
    out = bulk.Sender(ctx, SENDER, 64 * 1024)
    into = bulk.Receiver(
        ctx, "127.0.0.1", RECEIVER, SECURITY, peers=(SENDER, OTHER), sealed_bytes=1 << 20
    )
    out.want(RECEIVER, into.address, into.announce())
    out.apply()
    try:
        yield out, into
    finally:
        out.close()
        into.close()
        SECURITY.release(ctx)
        ctx.term()


def arrive_before_the_key(out: bulk.Sender, into: bulk.Receiver, arrays: list[Any]) -> Any:
    """Send a message; the receiver reads its sealed part (if any) before the sender's
    HELLO, then gets the key; the message that names the buffers is decoded then."""
    frames = connected(out, message(arrays), len(arrays))
    msg = fr.decode(frames)
    if isinstance(msg.body, fr.BulkTuples):
        # POLLIN may come first for the PLAIN handshake's credential, which a read skips
        deadline = time.monotonic() + 10
        while not into.read():
            assert time.monotonic() < deadline, "the sealed buffers never came"
            into.pull.poll(100)
    into.keyed(SENDER, out.announce())
    return msg


def test_a_message_past_the_pre_key_budget_is_not_lost(pair):
    out, into = pair
    big = np.arange((1 << 20) // 8 + 1, dtype=np.float64)  # sealed: just past 1 MiB
    msg = arrive_before_the_key(out, into, [big])
    assert into.forged == 0
    if isinstance(msg.body, fr.BulkTuples):  # sealed: it must open
        opened = into.open(SENDER, msg.body.first, msg.body.count, wait=0.5)
        got = np.frombuffer(opened[0])
    else:  # inside the CURVE link, whole
        ((_, _, _, rows, _),) = msg.body  # TUPLES: its batches, loaded
        got = rows[0][0]
    assert np.array_equal(got, big)


def test_a_message_within_the_budget_goes_sealed_and_opens_after_the_key(pair):
    out, into = pair
    arrays = [np.full(8192 * 7, i, dtype=np.float64) for i in range(2)]  # 2 x 448 KiB
    msg = arrive_before_the_key(out, into, arrays)
    assert isinstance(msg.body, fr.BulkTuples)
    opened = into.open(SENDER, msg.body.first, msg.body.count, wait=0.5)
    assert [np.frombuffer(b)[0] for b in opened] == [0.0, 1.0]
    assert into.forged == into.missing == 0


def test_what_fits_is_what_a_receiver_keeps_ahead_of_a_key():
    """At the real sizes: the receiver's default budget is the sender's bound, and the
    header frame is within the room kept for it."""
    assert bulk.PRE_KEY_BYTES == bulk.HWM * bulk.SEALED_MESSAGE_BYTES == 64 << 20
    room = bulk.PRE_KEY_BYTES - bulk.HEADER_ROOM
    assert bulk.fits([room - bulk.TAG]) and not bulk.fits([room - bulk.TAG + 1])
    assert bulk.fits([1000] * 4) and not bulk.fits([bulk.MAX_FRAME])
    assert len(fr.bulk_header(2**32 - 1, 2**64 - 1)) <= bulk.HEADER_ROOM
    ctx = zmq.Context()
    try:
        into = bulk.Receiver(ctx, "127.0.0.1", RECEIVER, SECURITY, peers=(SENDER,))
        assert into.sealed_bytes == bulk.PRE_KEY_BYTES
        into.close()
    finally:
        SECURITY.release(ctx)
        ctx.term()


def test_one_tuple_past_64_mib_takes_the_link_at_the_real_sizes():
    ctx = zmq.Context()
    out = bulk.Sender(ctx, SENDER, 64 * 1024)
    into = bulk.Receiver(ctx, "127.0.0.1", RECEIVER, SECURITY, peers=(SENDER,))
    try:
        out.want(RECEIVER, into.address, into.announce())
        out.apply()
        big = np.zeros((64 << 20) // 8 + 1, dtype=np.float64)
        frames = message([big])
        assert connected(out, frames, 1) is frames  # not sealed: inside the CURVE link
        assert out.messages == 0
        small = message([np.zeros(8192)])
        assert isinstance(fr.decode(connected(out, small, 1)).body, fr.BulkTuples)
    finally:
        out.close()
        into.close()
        SECURITY.release(ctx)
        ctx.term()


def test_the_largest_buffer_that_fits_goes_sealed_within_the_sockets_frame_bound():
    """The bulk socket refuses a frame past `FRAME_BOUND` (64 MiB, it was 2 GiB): the
    largest buffer `fits` lets through is sealed into a frame within it, and arrives."""
    assert bulk.FRAME_BOUND == bulk.PRE_KEY_BYTES
    ctx = zmq.Context()
    out = bulk.Sender(ctx, SENDER, 64 * 1024)
    into = bulk.Receiver(ctx, "127.0.0.1", RECEIVER, SECURITY, peers=(SENDER,))
    try:
        assert into.pull.getsockopt(zmq.MAXMSGSIZE) == bulk.FRAME_BOUND
        into.keyed(SENDER, out.announce())
        out.want(RECEIVER, into.address, into.announce())
        out.apply()
        n = bulk.PRE_KEY_BYTES - bulk.HEADER_ROOM - bulk.TAG  # one byte more takes the link
        big = np.frombuffer(np.random.default_rng(1).bytes(n), dtype=np.uint8)
        msg = fr.decode(connected(out, message([big]), 1))
        assert isinstance(msg.body, fr.BulkTuples)
        (opened,) = into.open(SENDER, msg.body.first, 1, wait=30)
        assert len(opened) == n and opened == big.tobytes()
    finally:
        out.close()
        into.close()
        SECURITY.release(ctx)
        ctx.term()
