"""Why a spout tuple failed: what `Spout.fail(msg_id, failure)` receives.

A spout whose `fail` takes a second argument is told why each tree failed, and whether
the failure is final: with `topology.max.replays` set, a tree that failed that many
times is dead-lettered (emitted on the spout's `__dead_letter` stream when a bolt
subscribes to it) and must not be replayed again. A spout whose `fail` takes only the
message id is called as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FAILED, TIMED_OUT = "failed", "timed out"


@dataclass(frozen=True, slots=True)
class Failure:
    """`reason`: "failed" (a bolt failed the tuple, or raised) or "timed out" (the tree
    did not complete within `topology.message.timeout.secs`). `component`: the component
    that failed it (None on a timeout). `error`: that component's exception, as
    "Type: message", when an uncaught error failed it. `failures`: how many times this
    message id has failed, this one included (counted while `topology.max.replays` is
    set, else 1). `dead_letter`: final, do not replay."""

    reason: str
    component: str | None = None
    error: str | None = None
    failures: int = 1
    dead_letter: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "component": self.component,
            "error": self.error,
            "failures": self.failures,
            "dead_letter": self.dead_letter,
        }
