"""A supervisor's reconciliation: which workers to stop and start (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stormish.cluster.supervisor import changes


def _w(t, i, port, epoch=1, control="tcp://n:6628"):
    return {"topology": t, "index": i, "port": port, "control": control, "epoch": epoch}


def test_a_new_epoch_restarts_a_worker_on_the_same_port():
    have = {("t", 0): (6700, "tcp://n:6628", 1)}
    assert changes(have, [_w("t", 0, 6700, epoch=1)]) == ([], {})
    assert changes(have, [_w("t", 0, 6700, epoch=2)]) == (
        [("t", 0)],
        {("t", 0): (6700, "tcp://n:6628", 2)},
    )


def test_workers_nimbus_no_longer_wants_are_stopped():
    have = {("t", 0): (6700, "c", 1), ("u", 1): (6701, "c", 1)}
    assert changes(have, [_w("u", 1, 6701, control="c")]) == ([("t", 0)], {})


specs = st.tuples(st.integers(6700, 6703), st.sampled_from(["a", "b"]), st.integers(1, 3))
keys = st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 3))


@given(st.dictionaries(keys, specs), st.dictionaries(keys, specs))
def test_applying_the_changes_gives_what_nimbus_wants(have, want):
    wanted = [_w(t, i, p, e, c) for (t, i), (p, c, e) in want.items()]
    stop, start = changes(have, wanted)
    after = {k: v for k, v in have.items() if k not in stop}
    assert not set(after) & set(start)  # a worker is never started twice
    after.update(start)
    assert after == want
    assert all(have[k] == want[k] for k in have.keys() & want.keys() if k not in stop)
