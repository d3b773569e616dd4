"""What one worker process told over the control channel, kept for the handle that asks.

Two handles ask worker processes the same questions: the local cluster's `WorkerHandle`
(a child process of this one) and nimbus's `ClusterWorker` (a process a supervisor runs,
known by its hellos). They differ in how they know a worker is alive and what a dead
one means (the local run fails; under a supervisor it is restarted), and agree on the
rest, which lives here and which each holds one of (composition, not a subclass):

- a stopped worker answered `stop` with its final statistics, results and errors, and
  from then on answers nothing: every question is answered from that final record;
- a worker may report a failure (an executor that died) in any answer: kept, and said
  by `failure` from then on, until the worker starts again (`reset`).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..errors import WorkerError

# a stopped worker: nothing left to do
QUIET = {
    "spouts_done": True,
    "spouts_ended": True,
    "idle": True,
    "transferred": 0,
    "consumed": 0,
    "dropped": 0,
}
# a worker that is not there: never complete while one is missing (transferred -1)
NOT_QUIET = {
    "spouts_done": False,
    "spouts_ended": False,
    "idle": False,
    "transferred": -1,
    "consumed": 0,
    "dropped": 0,
}


class Ask(Protocol):
    def __call__(self, verb: str, payload: Any = None, timeout: float = ...) -> Any: ...


class WorkerAnswers:
    """The final record and reported failure of worker `index`'s current incarnation.
    `failure` may also be set by the handle (how its process ended)."""

    def __init__(self, index: int):
        self.index = index
        self.final: dict[str, Any] | None = None  # its answer to `stop`
        self.failure: str | None = None

    def reset(self) -> None:
        """A new incarnation: nothing known of it yet."""
        self.final = None
        self.failure = None

    @property
    def ended(self) -> bool:
        return self.final is not None

    def quiescence(self, ask: Ask) -> dict[str, Any]:
        if self.final is not None:
            return dict(QUIET)
        q = ask("quiescence")
        if q.get("failure"):
            self.failure = f"worker {self.index}: {q['failure']}"
        return q

    def stats(self, ask: Ask) -> tuple[list, dict]:
        if self.final is not None:
            return self.final["tasks"], self.final["links"]
        tasks, links, failure = ask("stats")
        if failure:
            self.failure = f"worker {self.index}: {failure}"
        return tasks, links

    def stop(self, ask: Ask, timeout: float) -> list[str]:
        """Ask the worker to stop (close/cleanup run) and keep its final record; the
        executors that did not stop in time, by name."""
        if self.final is not None:
            return []
        try:
            return self.stopped_with(ask("stop", timeout, timeout=timeout + 10))
        except WorkerError as exc:
            return [f"worker {self.index}: {exc}"]

    def stopped_with(self, final: dict[str, Any]) -> list[str]:
        """Its answer to `stop` (asked of several workers at once by their group)."""
        self.final = final
        return list(final["stuck"])

    def results(self) -> dict[str, list[tuple[int, Any]]]:
        # absent when an unkeyed controller would not unpickle them (control.CODE_FIELDS)
        return {} if self.final is None else self.final.get("results", {})

    def errors(self) -> list[dict[str, Any]]:
        return [] if self.final is None else self.final["errors"]
