"""RemoteTarget and TransferQueue: refusal instead of blocking, order per worker."""

from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.transport.remote import RemoteTarget, TransferQueue


def test_flagged_task_refuses_and_nothing_is_queued():
    tq = TransferQueue(10)
    flagged = {7}
    t = RemoteTarget(7, 1, tq, flagged)
    assert not t.try_publish((1, "default", [(1,)], None), 1)
    assert len(tq) == 0
    assert t.load() == 1.0
    flagged.discard(7)
    assert t.try_publish((1, "default", [(1,)], None), 1)
    assert tq.drain() == {1: [(7, 1, "default", [(1,)], None)]}
    assert t.load() == 0.0


def test_full_transfer_queue_refuses():
    tq = TransferQueue(2)
    t = RemoteTarget(3, 0, tq, set())
    assert t.try_publish((1, "s", [1], None), 1)
    assert t.try_publish((1, "s", [2], None), 1)
    assert not t.try_publish((1, "s", [3], None), 1)
    assert tq.refused == 1 and tq.offered == 2
    tq.drain()
    assert t.try_publish((1, "s", [3], None), 1)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1000)), max_size=60))
def test_drain_groups_by_worker_in_order(items):
    tq = TransferQueue(1000)
    for worker, v in items:
        assert tq.try_put(worker, (v,), 1)
    out = tq.drain()
    for worker in range(4):
        assert out.get(worker, []) == [(v,) for w, v in items if w == worker]
    assert tq.drain() == {}


def test_wait_is_woken_by_a_put():
    import threading

    tq = TransferQueue(4)
    got = []
    th = threading.Thread(target=lambda: got.append(tq.wait(10)))
    th.start()
    tq.try_put(0, ("x",), 1)
    th.join(10)
    assert got == [True]


def test_a_batch_for_another_worker_is_packed_once_it_is_accepted():
    from stormish.transport.frames import PACK_MIN_ROWS, Packed

    tq = TransferQueue(10)
    flagged = {4}
    t = RemoteTarget(4, 1, tq, flagged)
    rows = [(i,) for i in range(PACK_MIN_ROWS)]
    assert not t.try_publish((2, "default", rows, None), len(rows))  # refused: not packed
    flagged.clear()
    assert t.try_publish((2, "default", rows, None), len(rows))
    assert t.try_publish((2, "default", rows[:3], None), 3)  # a few rows go as they are
    (dest, src, stream, packed, metas), small = tq.drain()[1]
    assert (dest, src, stream, metas) == (4, 2, "default", None)
    assert type(packed) is Packed and packed.rows() == rows
    assert small == (4, 2, "default", rows[:3], None)
