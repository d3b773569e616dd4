"""Faults of nimbus itself on a real cluster (nimbus and two supervisors as processes on
127.0.0.1, the `cluster` fixture): a kill -9 while a topology's workers are being
stopped at its end, and a pause (SIGSTOP) longer than the supervisors' timeout.

Neither may leave a topology `running` for ever with its workers gone, nor take a
pause of nimbus itself for every supervisor's silence (which restarted every worker).
"""

from __future__ import annotations

import os
import re
import signal
import time

import psutil
import pytest

from stormish import Topology
from stormish.testing import poll_for

from .ledger import LedgerSink, LedgerSpout, Relay, pipeline

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]

GATE_WAIT = 60.0  # a sink's cleanup waits this long at most for the test's gate


class GatedCleanupSink(LedgerSink):
    """A sink whose cleanup (run while nimbus stops the workers at the topology's end)
    says it began (`cleanup-PID` in the ledger) and waits for the file `gate`: the
    test kills nimbus in that window, whatever the machine's speed."""

    def __init__(self, ledger: str, gate: str):
        super().__init__(ledger)
        self.gate = gate

    def cleanup(self) -> None:
        open(os.path.join(self.ledger, f"cleanup-{os.getpid()}"), "w").close()
        end = time.monotonic() + GATE_WAIT
        while not os.path.exists(self.gate) and time.monotonic() < end:
            time.sleep(0.01)
        super().cleanup()


def _cleanups(ledger: str) -> list[str]:
    return [f for f in os.listdir(ledger) if f.startswith("cleanup-")]


@pytest.mark.parametrize("stale", [False, True], ids=["saved", "stale-state"])
def test_nimbus_killed_while_a_topology_ends_restarts_with_it_ended(
    cluster, ledger, watch, stale: bool
):
    """Nimbus saves the end before it stops the workers: killed -9 while they stop,
    it restarts with the topology ended (no longer listed running), and the worker it
    had not stopped yet is stopped (its supervisor is no longer asked for it).

    `stale`: the state saved says `running` all the same (an older nimbus, a save that
    failed on a full disk): the restored topology, one of whose workers its supervisor
    reports finished, is ended then, not left `running` for ever."""
    c = cluster
    gate = os.path.join(ledger, "gate")
    poll_for(lambda: len(c.call("supervisors")) == 2, 30, 0.1, "two supervisors")
    t = Topology("ending", config={"topology.workers": 2, "topology.message.timeout.secs": 10})
    t.set_spout("src", LedgerSpout(ledger, 300))
    t.set_bolt("relay", Relay(), parallelism=2).shuffle_grouping("src")
    t.set_bolt("sink", GatedCleanupSink(ledger, gate), parallelism=2).fields_grouping(
        "relay", ["id"]
    )
    c.call("submit", (t, {}))
    c.wait_status("ending", "running")
    state = os.path.join(c.data, "topologies", "ending", "state.json")
    with open(state, "rb") as fh:
        running = fh.read()
    watch.begin()
    poll_for(lambda: _cleanups(ledger), 90, 0.01, "the workers being stopped at the end")
    c.nimbus.kill()  # SIGKILL while nimbus waits for the first worker's stop
    c.nimbus.wait(30)
    open(gate, "w").close()
    if stale:
        with open(state, "wb") as fh:
            fh.write(running)
    c.start_nimbus()

    def ended() -> bool:
        rows = {r["name"]: r["status"] for r in c.call("list")}
        return rows.get("ending", "complete") != "running" and not c.workers()

    try:
        poll_for(ended, 60, 0.2, "the topology ended and its workers stopped")
    except TimeoutError:
        raise AssertionError(f"still running after the restart\n{c.log_tails()}") from None
    if stale:
        assert "had finished (stopped by a nimbus that ended" in c.log("nimbus.log")
    else:
        assert "restored topology 'ending'" not in c.log("nimbus.log")


def test_a_pause_of_nimbus_longer_than_the_task_timeout_loses_no_supervisor(cluster, ledger, watch):
    """SIGSTOP of nimbus for longer than --task-timeout (5 s): the supervisors beat on
    meanwhile; nimbus reads their queued beats and counts its own pause as nobody's
    silence, so no supervisor is lost and no worker restarted."""
    c = cluster
    poll_for(lambda: len(c.call("supervisors")) == 2, 30, 0.1, "two supervisors")
    c.call("submit", (pipeline("paused", ledger, 30_000, 0.002), {}))
    c.wait_status("paused", "running")
    poll_for(lambda: len(c.workers()) == 2, 30, 0.1, "two workers")
    pids = {p.pid for p in c.workers()}
    watch.begin()
    nimbus = psutil.Process(c.nimbus.pid)
    nimbus.send_signal(signal.SIGSTOP)
    try:
        # the supervisors' beats queue up meanwhile: nimbus is deaf past its timeout
        poll_for(lambda: nimbus.status() == psutil.STATUS_STOPPED, 10, 0.05, "nimbus stopped")
        stopped = time.monotonic()
        poll_for(lambda: time.monotonic() - stopped > c.task_timeout + 2, 30, 0.2, "the pause")
    finally:
        nimbus.send_signal(signal.SIGCONT)

    def heard_both() -> bool:  # answered after the resume, with both beats read since
        sups = c.call("supervisors")
        return len(sups) == 2 and all(s["heard_seconds_ago"] < 1.5 for s in sups)

    poll_for(heard_both, 30, 0.1, "both supervisors heard after the pause")
    log = c.log("nimbus.log")
    assert not re.search(r"supervisor s\d lost", log), log[-3000:]
    assert {p.pid for p in c.workers()} == pids
    assert c.status("paused") == "running"
    c.call("kill", ("paused", 0))
    c.wait_status("paused", "killed")
