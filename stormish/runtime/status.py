"""A topology's status: one enum for the local cluster, nimbus, the CLI and the UI.

A `str` enum, so a status is its own text wherever it goes (JSON, the REST API, the
statistics' records on the wire) and compares equal to it (`status == "running"`).
"""

from __future__ import annotations

from enum import StrEnum


class TopologyStatus(StrEnum):
    STARTING = "starting"  # nimbus placed it; not all of its workers are up yet
    RUNNING = "running"
    REBALANCING = "rebalancing"  # the final statistics of a plan nimbus replaced
    COMPLETE = "complete"  # a finite topology's input was all processed
    KILLED = "killed"
    FAILED = "failed"

    @property
    def ended(self) -> bool:
        return self in ENDED

    @property
    def live(self) -> bool:
        """Nimbus still runs it (or is bringing it up)."""
        return self in (TopologyStatus.STARTING, TopologyStatus.RUNNING)


ENDED = frozenset({TopologyStatus.COMPLETE, TopologyStatus.KILLED, TopologyStatus.FAILED})
