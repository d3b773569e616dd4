"""The shared-memory pool and reader without sockets: buffers written once, read in
place, released when the last view goes; bad references and releases refused."""

from __future__ import annotations

import gc
import pickle

import pytest

from stormish.transport import frames as fr
from stormish.transport import shm

pytestmark = pytest.mark.skipif(not shm.usable(), reason="no /dev/shm")

BIG = 100_000


@pytest.fixture
def pool():
    p = shm.Pool(8 << 20)
    yield p
    p.close()
    assert shm.leftovers() == [] or not any(n.startswith(p.prefix) for n in shm.leftovers())


def buffers(*values):
    out = []
    pickle.dumps(values, protocol=5, buffer_callback=lambda b: out.append(b) or False)
    return out


def test_views_read_what_was_written_and_release_when_dropped(pool):
    reader, released = shm.Reader(), []
    assert reader.know(1, pool.prefix)
    data = bytearray(range(256)) * (BIG // 256)
    refs = pool.place(1, [pickle.PickleBuffer(data), pickle.PickleBuffer(bytes(BIG))])
    assert pool.lent() == 1  # both in one segment
    views = reader.views(1, refs, released.append)
    assert bytes(views[0]) == bytes(data) and bytes(views[1]) == bytes(BIG)
    kept = memoryview(views[0])
    del views
    gc.collect()
    assert released == []  # a view is still held
    del kept
    assert released == [0]
    pool.release(1, released)
    assert pool.lent() == 0


def test_a_tuples_message_round_trips_through_a_segment(pool):
    reader, released = shm.Reader(), []
    reader.know(0, pool.prefix)
    blob = b"\x07" * BIG
    frames = fr.encode_tuples(0, 1, [(2, 1, "default", [(blob, "small")], None)])
    assert len(frames) == 3
    msg = fr.decode(fr.as_shm(frames, pool.place(1, frames[2:]), 1))
    assert msg.kind == fr.Kind.SHM_TUPLES
    assert msg.body.tuples == 1  # what a receiver that drops it unread counts
    batches = fr.load_tuples(msg.body.pickle, reader.views(0, msg.body.refs, released.append))
    assert batches == [(2, 1, "default", [(blob, "small")], None)]
    assert released == [0]  # bytes are copied out: the segment is free at once


def test_a_segment_is_not_reused_while_lent(pool):
    big = pickle.PickleBuffer(bytes(3 << 20))
    assert pool.place(1, [big]) is not None
    assert pool.place(1, [big]) is not None
    assert pool.place(1, [big]) is None  # 8 MiB: two 4 MiB segments, both lent
    pool.release(2, [0])  # not lent to worker 2
    assert pool.bad_releases == 1 and pool.place(1, [big]) is None
    pool.release(1, [0])
    assert pool.place(1, [big]) is not None


def test_a_buffer_larger_than_the_pool_is_refused(pool):
    with pytest.raises(shm.ShmError, match="more than the pool"):
        pool.place(1, [pickle.PickleBuffer(bytes(9 << 20))])


@pytest.mark.parametrize(
    "refs, why",
    [
        (b"\0\0\0\1", "references frame"),
        (b"\0\0\0\1" + b"\0" * 20, "past its"),  # length 0
        (b"\0\0\0\1" + (7).to_bytes(4, "big") + b"\0" * 8 + (1).to_bytes(8, "big"), "segment"),
    ],
)
def test_bad_references_raise_shm_error(pool, refs, why):
    reader = shm.Reader()
    reader.know(1, pool.prefix)
    pool.place(1, [pickle.PickleBuffer(bytes(BIG))])
    with pytest.raises(shm.ShmError, match=why):
        reader.views(1, refs, lambda seg: None)


def test_names_from_a_peer_must_be_segment_names(pool):
    reader = shm.Reader()
    for prefix in ("../etc/passwd", "stormish-shm-1-zz-", 5, "stormish-shm-1-0000000-"):
        assert not reader.know(1, prefix)
    assert not reader.know(1, "stormish-shm-1-00000000-")  # valid, but no probe: not here
    with pytest.raises(shm.ShmError, match="never named"):
        reader.views(1, b"", lambda seg: None)


def test_remove_for_removes_a_dead_process_segments(pool):
    pool.place(1, [pickle.PickleBuffer(bytes(BIG))])
    import os

    mine = [n for n in shm.leftovers(os.getpid()) if n.startswith(pool.prefix)]
    assert len(mine) == 2  # the probe and one segment
    assert shm.remove_for(os.getpid()) >= 2
    assert not [n for n in shm.leftovers(os.getpid()) if n.startswith(pool.prefix)]


def test_a_message_is_cut_between_tuples_keeping_order_and_stamps():
    from stormish.transport.link import _cut
    from stormish.tuple import StampedRows

    part = [
        (2, 1, "s", [("a",), ("b",)], None),
        (2, 1, "s", StampedRows([("c",), ("d",), ("e",)], 5.0), [1, 2, 3]),
        (3, 1, "s", [("f",)], None),
    ]
    rest = _cut(part, 3)
    assert part == [(2, 1, "s", [("a",), ("b",)], None), (2, 1, "s", [("c",)], [1])]
    assert type(part[1][3]) is StampedRows and part[1][3].born == 5.0
    assert rest == [(2, 1, "s", [("d",), ("e",)], [2, 3]), (3, 1, "s", [("f",)], None)]
    assert rest[0][3].born == 5.0
    assert _cut(part, 3) == []  # already no longer than that


def test_a_restarted_peer_segments_are_retired_not_reused(pool):
    """What its former incarnation held may still reach the new one in a message in
    flight: that segment must not carry another message meanwhile."""
    reader = shm.Reader()
    reader.know(1, pool.prefix)
    old = pool.place(1, [pickle.PickleBuffer(b"\x01" * BIG)])
    pool.forget(1)
    assert pool.lent() == 0 and pool.used == 0
    assert pool.place(1, [pickle.PickleBuffer(b"\x02" * BIG)]) is not None  # a new segment
    with pytest.raises(shm.ShmError, match="cannot open segment"):
        reader.views(1, old, lambda seg: None)
    pool.release(1, [0])  # a late release of the retired one
    assert pool.bad_releases == 1 and pool.lent() == 1
