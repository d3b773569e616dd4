"""LocalCluster: the embedded cluster that runs topologies on this machine.

Programmatic use: `with LocalCluster() as c: c.submit(t); c.wait_complete(t.name)`.
The runtime is imported lazily so that `import stormish` stays light.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..errors import StormishError, TopologyError, WorkerError
from ..topology import Topology


class LocalCluster:
    def __init__(
        self, workers: int | None = None, config: Mapping[str, Any] | None = None, clock: Any = None
    ):
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise TopologyError(
                f"LocalCluster(workers=...) must be an integer >= 1, got {workers!r}"
            )
        self.workers = workers
        self.config = dict(config or {})
        self.clock = clock
        self._running: dict[str, Any] = {}

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def submit(
        self, topology: Topology, config: Mapping[str, Any] | None = None, active: bool = True
    ) -> None:
        """Validate and start a topology; nothing is started if any check fails.
        `active=False` submits it inactive (Storm's `--inactive`): no spout is opened, so
        nothing is emitted, until `activate(name)`."""
        from .running import RunningTopology

        if not isinstance(topology, Topology):
            raise TopologyError(f"submit() needs a Topology, got {type(topology).__name__}")
        if topology.name in self._running and not self._running[topology.name].ended:
            raise TopologyError(f"topology {topology.name!r} is already running")
        extra = dict(self.config)
        extra.update(config or {})
        if self.workers is not None:
            extra["topology.workers"] = self.workers
        running = RunningTopology.start(topology, extra, clock=self.clock, active=active)
        self._running[topology.name] = running

    def _get(self, name: str) -> Any:
        try:
            return self._running[name]
        except KeyError:
            raise StormishError(
                f"no topology named {name!r} in this cluster; running: {sorted(self._running)}"
            ) from None

    def wait_complete(self, name: str, timeout: float = 60.0) -> Any:
        """Block until the finite topology `name` has processed everything, then stop it
        (close/cleanup run) and return its final statistics. Raises TimeoutError, or
        WorkerError when a worker or executor died."""
        return self._get(name).wait_complete(timeout)

    def statistics(self, name: str) -> Any:
        return self._get(name).statistics()

    def kill(self, name: str, wait_secs: float = 0.0) -> Any:
        """Deactivate spouts, wait `wait_secs` for in-flight tuples, then stop."""
        return self._get(name).kill(wait_secs)

    def activate(self, name: str) -> None:
        self._get(name).set_active(True)

    def deactivate(self, name: str) -> None:
        self._get(name).set_active(False)

    def topologies(self) -> list[str]:
        return [n for n, r in self._running.items() if not r.ended]

    def shutdown(self) -> None:
        for r in self._running.values():
            if not r.ended:
                r.kill(0.0)


def poll_for(predicate: Any, timeout: float, interval: float = 0.01, what: str = "") -> Any:
    """Wait for a condition with a deadline (never a bare sleep as synchronisation)."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


__all__ = ["LocalCluster", "WorkerError", "poll_for"]
