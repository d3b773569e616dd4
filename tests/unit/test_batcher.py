"""The batches a batch-settle bolt gets, on a fake clock: cut at the
batch size, one group (lane) per batch in arrival order, flushed when the oldest row has
waited max_wait, every row exactly once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stormish.runtime.batcher import Batcher

steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 3), st.integers(1, 9)),
        st.tuples(st.just("tick"), st.floats(0.0, 0.5), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8), st.one_of(st.none(), st.floats(0.05, 1.0)), steps)
def test_batches_are_whole_groups_in_order_and_every_row_leaves_once(size, wait, script):
    b = Batcher(size, wait)
    now = 0.0
    seq = {g: 0 for g in range(4)}
    oldest: dict[int, float] = {}  # group -> when its oldest waiting row came
    out: list = []
    for op, x, k in script:
        if op == "tick":
            now += x
            due = b.due(now)
            for _src, _stream, rows, _metas, _late in due:
                g = rows[0][0]
                assert wait is not None and now - oldest[g] >= wait - 1e-9
            out += due
        else:
            rows = [(x, seq[x] + i) for i in range(k)]
            seq[x] += k
            full = b.add(x, 1, "s", rows, [((r[1], 1),) for r in rows], now)
            assert all(len(f[2]) == size for f in full)
            out += full
        for batch in out:
            oldest.pop(batch[2][0][0], None)
        for g, grp in b.groups.items():
            if grp.rows:
                oldest.setdefault(g, grp.since)
        assert b.waiting == sum(len(g.rows) for g in b.groups.values())
        nd = b.next_due()
        assert (nd is None) == (wait is None or not b.waiting)
    out += b.drain()
    assert b.waiting == 0
    for _src, _stream, rows, metas, _late in out:
        assert 1 <= len(rows) <= size
        assert len({r[0] for r in rows}) == 1  # one group a batch
        assert metas == [((r[1], 1),) for r in rows]  # each row keeps its tree ids
    for g in range(4):
        got = [r[1] for batch in out for r in batch[2] if r[0] == g]
        assert got == list(range(seq[g]))  # in order, each once


def test_a_partial_batch_leaves_when_its_oldest_row_has_waited():
    b = Batcher(10, 0.5)
    assert b.add("a", 1, "s", [(1,), (2,)], None, now=0.0) == []
    b.add("a", 1, "s", [(3,)], None, now=0.4)
    assert b.next_due() == 0.5
    assert b.due(0.49) == []
    assert b.due(0.5) == [(1, "s", [(1,), (2,), (3,)], None, False)]
    assert b.next_due() is None and b.waiting == 0
