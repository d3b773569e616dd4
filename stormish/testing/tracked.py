"""tracked_wait and advance_time: wait for a running topology without sleeping (Storm's
tracked-wait and advance-cluster-time). Import them from `stormish.testing`.

`tracked_wait` waits until n more fed tuples, and everything they caused, are processed:
the FeederSpouts have emitted them and the topology is quiet by the completion rule of
`RunningTopology` (without "every spout finished"). `advance_time` moves a FakeClock in
steps and after each waits until the topology has done what the new time allows
(`local/simtime.py`). Both end by waiting until every ack and fail that the spouts'
statistics count has reached the test's FeederSpout, so `is_acked`/`is_failed` are
exact when they return.
"""

from __future__ import annotations

import math
import time
import weakref
from typing import Any

from ..clock import FakeClock
from ..errors import StormishError
from ..local import LocalCluster
from .feeder import FeederSpout

POLL = 0.002
# Fed tuples counted by earlier tracked waits, per running topology (Storm's
# lastSpoutCommit): a wait for n more targets this plus n.
_committed: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def tracked_wait(
    cluster: LocalCluster, topology_name: str, n: int = 1, timeout: float = 30.0
) -> None:
    """Return once n more tuples fed to the topology's FeederSpouts (since the last
    tracked wait) were emitted and the topology is quiet: every queue, outbox and
    pendingEmitQ empty, every tuple published consumed. A fake clock is not moved."""
    if n < 0:
        raise ValueError(f"tracked_wait needs n >= 0, got {n!r}")
    deadline = time.monotonic() + timeout
    running = cluster._get(topology_name)
    feeders = _feeders(running)
    if not feeders:
        raise StormishError(f"topology {topology_name!r} has no FeederSpout to track")
    target = _committed.get(running, 0) + n

    def emitted() -> int:
        running.check_failed()
        return sum(f.emitted for f in feeders.values())

    _poll(lambda: emitted() >= target, deadline, f"{target} fed tuples emitted", emitted)
    running.wait_quiet(max(0.0, deadline - time.monotonic()))
    _catch_up(running, feeders, deadline)
    _committed[running] = target


def advance_time(
    cluster: LocalCluster, secs: float, step: float = 1.0, timeout: float = 30.0
) -> None:
    """Move the cluster's FakeClock `secs` forward in steps of `step`; before the first
    step and after each one, wait until every running topology settled (threads asleep
    in the clock until a future time count as quiet; a thread whose time has come, or an
    executor inside user code, does not), so a message timeout, a reset or a tick due at
    one step is processed before time moves on. `timeout` bounds each wait, in real time."""
    clock = cluster.clock
    if not isinstance(clock, FakeClock):
        raise StormishError("advance_time needs a LocalCluster(clock=FakeClock())")
    if secs < 0 or not step > 0:
        raise ValueError(f"advance_time needs secs >= 0 and step > 0, got {secs!r}, {step!r}")
    from ..local.simtime import wait_settled

    def settle() -> None:
        for name in cluster.topologies():
            running = cluster._get(name)
            channels = [f._test_side("advance_time") for f in _feeders(running).values()]
            deadline = time.monotonic() + timeout
            while True:  # fed tuples on their way to a task are not quiet either
                _poll(lambda: all(c.quiet() for c in channels), deadline,  # noqa: B023
                      "FeederSpouts to emit what they were handed", lambda: "")  # fmt: skip
                wait_settled(running, clock, max(0.0, deadline - time.monotonic()))
                if all(c.quiet() for c in channels):
                    break

    settle()
    steps = math.ceil(secs / step - 1e-9)
    for i in range(steps):
        clock.advance(min(step, secs - i * step))
        settle()
    deadline = time.monotonic() + timeout
    for name in cluster.topologies():
        running = cluster._get(name)
        _catch_up(running, _feeders(running), deadline)


def _feeders(running: Any) -> dict[str, FeederSpout]:
    return {
        name: spec.obj
        for name, spec in running.topology.components.items()
        if isinstance(spec.obj, FeederSpout)
    }


def _catch_up(running: Any, feeders: dict[str, FeederSpout], deadline: float) -> None:
    """Wait until each feeder heard of every ack and fail its tasks counted (a spout
    task counts a tree before its ack() or fail() runs, and the event then crosses a
    socket)."""
    if not feeders:
        return
    comps = running.statistics().components
    for name, feeder in feeders.items():
        c = comps.get(name)
        want = 0 if c is None else c.acked + c.failed
        channel = feeder._test_side("tracked_wait")
        _poll(lambda ch=channel, w=want: ch.reported() >= w, deadline,
              f"{want} acks and fails at FeederSpout {name!r}", channel.reported)  # fmt: skip


def _poll(ok: Any, deadline: float, what: str, progress: Any) -> None:
    while not ok():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out waiting for {what} (have {progress()})")
        time.sleep(POLL)
