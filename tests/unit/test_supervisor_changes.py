"""A supervisor's reconciliation: which workers to stop and start (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stormish.cluster.supervisor import changes, moved


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
    for k, address in moved(have, wanted).items():  # told where nimbus is, not restarted
        assert k in after
        after[k] = (after[k][0], address, after[k][2])
    after.update(start)
    assert after == want


def test_another_nimbus_taking_over_moves_the_workers_controller_without_a_restart():
    """HA: the new leader's control address differs; a restart would stop the topology."""
    have = {("t", 0): (6700, "tcp://n1:6628", 1)}
    wanted = [_w("t", 0, 6700, epoch=1, control="tcp://n2:6628")]
    assert changes(have, wanted) == ([], {})
    assert moved(have, wanted) == {("t", 0): "tcp://n2:6628"}
    assert moved(have, [_w("t", 0, 6700, epoch=2, control="tcp://n2:6628")]) == {}


def test_the_restart_policy_restarts_at_once_then_doubles_its_wait_up_to_the_ceiling():
    from stormish.cluster.restarts import RestartPolicy

    p = RestartPolicy(base=1.0, ceiling=30.0)
    assert [p.delay(n) for n in range(1, 9)] == [0, 1, 2, 4, 8, 16, 30, 30]
    assert [RestartPolicy(0, 30).delay(n) for n in (1, 5)] == [0, 0]  # Storm's: at once
    # a worker that stayed up longer than the ceiling recovered: a first crash again
    assert p.crashes_after(5, lived=31.0) == 1
    assert p.crashes_after(5, lived=2.0) == 6
    assert p.crashes_after(0, lived=0.1) == 1


def test_a_restart_policy_with_its_ceiling_below_its_base_is_refused_by_name():
    from stormish.cluster.restarts import RestartPolicy
    from stormish.errors import ConfigError

    with pytest.raises(ConfigError, match="--restart-backoff 5 and --restart-backoff-max 2"):
        RestartPolicy(5, 2)


def test_an_exit_is_told_as_a_person_reads_it_and_the_log_gives_its_last_line(tmp_path):
    from stormish.cluster.restarts import last_line
    from stormish.local.forkserver import describe_exit

    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-9) == "killed by signal SIGKILL"
    assert describe_exit(-200) == "killed by signal 200"
    log = tmp_path / "w.log"
    log.write_text("Traceback (most recent call last):\n  ...\nMemoryError: boom\n\n  \n")
    assert last_line(str(log)) == "MemoryError: boom"
    log.write_text("x" * 5000)
    assert len(last_line(str(log), limit=50)) == 50
    assert last_line(str(tmp_path / "missing.log")) is None


def test_a_stall_of_nimbus_does_not_take_a_live_supervisor_for_one_restarted(tmp_path):
    """Two live supervisors on one host offering the same ports; nimbus's loop stalls
    3.5 s and their queued beats come in turn: the first handled found the other
    'silent' and forgot it with its slots (review). A newcomer replaces a supervisor
    only after beating REPLACED_BEATS times since the old one's last beat."""
    import time
    from unittest import mock

    import stormish.cluster.nimbus as nm
    from stormish.transport.security import Loopback

    n = nm.Nimbus("tcp://127.0.0.1:0", "tcp://127.0.0.1:0", str(tmp_path), Loopback())
    try:

        def beat(sid: str) -> None:
            n.api_heartbeat({"id": sid, "host": "127.0.0.1", "ports": [6700, 6701]})

        beat("s0")
        beat("s1")
        real = time.monotonic
        with mock.patch.object(nm.time, "monotonic", lambda: real() + 3.5):
            beat("s0")  # the queued beats, in turn
            beat("s1")
            beat("s0")
            assert sorted(n.supervisors) == ["s0", "s1"]
        with mock.patch.object(nm.time, "monotonic", lambda: real() + 10):
            for _ in range(nm.REPLACED_BEATS):  # s1 gone quiet for good: s0 beats on
                beat("s0")
            assert sorted(n.supervisors) == ["s0"]
    finally:
        n.close()
