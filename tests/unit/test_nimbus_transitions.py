"""Nimbus's kill and rebalance (cluster/nimbus.py), on a Nimbus in this process (its
sockets on 127.0.0.1, no supervisor): waits that are not a number of seconds are refused
before anything changes, and a worker that is alive but does not answer keeps no kill or
rebalance from being recorded and carried out."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

from stormish import BasicBolt, Spout, StormishError, Topology
from stormish.cluster import api
from stormish.cluster import decide as dc
from stormish.errors import WorkerError
from stormish.runtime.status import TopologyStatus

pytestmark = pytest.mark.timeout(60)


class Endless(Spout):
    outputs = ["n"]

    def next_tuple(self) -> None:
        self.emit([1])


class Sink(BasicBolt):
    def execute(self, tup: Any) -> None:
        pass


def topology(name: str) -> Topology:
    t = Topology(name)
    t.set_spout("src", Endless())
    t.set_bolt("sink", Sink()).shuffle_grouping("src")
    return t


@pytest.fixture
def nimbus(tmp_path: Any) -> Iterator[Any]:
    import stormish.cluster.nimbus as nm
    from stormish.transport.security import Loopback

    n = nm.Nimbus("tcp://127.0.0.1:0", "tcp://127.0.0.1:0", str(tmp_path), Loopback())
    try:
        yield n
    finally:
        n.close()


def running(n: Any, name: str, workers: int = 2) -> Any:
    """A topology nimbus takes for running (its workers are never started here)."""
    n.api_submit(api.Submit(topology(name), {"topology.workers": workers}))
    d = n.deployments[name]
    d.status = TopologyStatus.RUNNING
    return d


def saved(n: Any, name: str) -> dict[str, Any]:
    return next(state for nm, _t, _c, state in n.store.load_all() if nm == name)


BAD_WAITS = [math.inf, -math.inf, math.nan, -1, 2**31, 1e300, True, "5", None]


@pytest.mark.parametrize("wait", BAD_WAITS[:-1])
def test_a_kill_or_rebalance_wait_that_is_not_seconds_is_refused_and_changes_nothing(
    nimbus: Any, wait: Any
) -> None:
    """Found by a bug hunt: kill -w inf left the topology killing for good, -w nan
    killed it at once ("in nans"); a client other than ours reaches nimbus as well."""
    d = running(nimbus, "t")
    told: list[bool] = []
    for w in d.handles:
        w.set_active = told.append  # type: ignore[method-assign]
    with pytest.raises(StormishError, match=r"kill 't': the wait must be a finite number"):
        nimbus.api_kill(api.Kill("t", wait))
    with pytest.raises(StormishError, match=r"rebalance 't': the wait must be a finite"):
        nimbus.api_rebalance(api.Rebalance("t", 1, wait))
    assert (d.kill_at, d.rebalance_at, d.active, told) == (None, None, True, [])
    assert saved(nimbus, "t")["kill_at"] is None


def test_the_largest_wait_is_storms_and_a_whole_or_fractional_one_is_taken(
    nimbus: Any,
) -> None:
    assert dc.wait_seconds("kill", "t", dc.MAX_WAIT_SECS) == 2**31 - 1
    assert dc.wait_seconds("kill", "t", 0) == 0.0 and dc.wait_seconds("kill", "t", 2.5) == 2.5
    d = running(nimbus, "t")
    for w in d.handles:
        w.set_active = lambda active: None  # type: ignore[method-assign]
    assert nimbus.api_kill(api.Kill("t", 7)) == 7.0
    assert d.kill_at is not None and 6 < d.kill_at - time.monotonic() <= 7


def not_answering(d: Any) -> list[bool]:
    """Workers alive (their hellos come) that do not answer: `ask` times out."""
    asked: list[bool] = []

    def set_active(active: bool) -> None:
        asked.append(active)
        raise WorkerError("worker 0 (pid 1) did not answer 'active' within 5.0s")

    for w in d.handles:
        w.set_active = set_active  # type: ignore[method-assign]
    return asked


def test_a_worker_that_does_not_answer_keeps_no_rebalance_from_being_scheduled(
    nimbus: Any,
) -> None:
    """Suspected in review, confirmed: the deactivation raised after d.active was
    False, so the rebalance was never scheduled, the client told it failed, and the
    spouts of the workers that had answered stayed deactivated for good."""
    d = running(nimbus, "t")
    asked = not_answering(d)
    assert nimbus.api_rebalance(api.Rebalance("t", 1, 30)) == 30.0
    assert asked == [False, False]
    assert d.rebalance_at is not None and d.rebalance_to == 1 and d.resume_active
    assert not d.active and d.untold == {0, 1}
    state = saved(nimbus, "t")
    assert state["rebalance_at"] is not None and state["active"] is False
    # the wait over: decide says rebalance, whatever the workers answered
    view = nimbus.view()
    ahead = dc.View(d.rebalance_at + 1, view.supervisor_timeout, view.supervisors,
                    view.topologies, view.hellos, view.failed)  # fmt: skip
    assert dc.Rebalance("t") in dc.decide(ahead)


def test_a_worker_that_does_not_answer_keeps_no_kill_from_being_recorded(nimbus: Any) -> None:
    d = running(nimbus, "t")
    not_answering(d)
    assert nimbus.api_kill(api.Kill("t", 20)) == 20.0
    assert d.kill_at is not None and not d.active and d.untold == {0, 1}
    assert saved(nimbus, "t")["kill_at"] is not None
    # activate / deactivate are recorded the same way (a killed one takes no more)
    e = running(nimbus, "u")
    not_answering(e)
    assert nimbus.api_deactivate("u") == TopologyStatus.RUNNING
    assert not e.active and saved(nimbus, "u")["active"] is False and e.untold == {0, 1}


def test_workers_that_did_not_answer_are_told_again_until_they_do(nimbus: Any) -> None:
    d = running(nimbus, "t")
    asked = not_answering(d)
    nimbus.api_deactivate("t")
    nimbus._tell_untold(d)  # too soon: not asked again
    assert asked == [False, False]
    told: list[tuple[int, bool]] = []
    for w in d.handles:
        w.set_active = lambda active, i=w.index: told.append((i, active))  # type: ignore[method-assign]
    d.tell_at = 0.0
    nimbus._tell_untold(d)
    assert sorted(told) == [(0, False), (1, False)] and d.untold == set()
    nimbus._tell_untold(d)  # nothing left to tell
    assert len(told) == 2


def test_a_rebalance_without_a_number_of_workers_keeps_the_number_it_has(nimbus: Any) -> None:
    """Storm's RebalanceOptions without num_workers (its UI's rebalance): spread again
    on as many workers."""
    running(nimbus, "u")
    for bad in (0, -1, 2.5, "2", True):  # refused before anything changes
        with pytest.raises(StormishError, match="workers must be a whole number >= 1"):
            nimbus.api_rebalance(api.Rebalance("u", bad, 0))
        assert nimbus.deployments["u"].plan.workers == 2
    d = running(nimbus, "t", workers=2)
    for w in d.handles:
        w.set_active = lambda active: None  # type: ignore[method-assign]
    assert nimbus.api_rebalance(api.Rebalance("t", None, 5)) == 5.0  # type: ignore[arg-type]
    assert d.rebalance_to == 2
