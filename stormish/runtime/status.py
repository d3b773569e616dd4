"""A topology's status: one enum for the local cluster, nimbus, the CLI and the UI.

A `str` enum, so a status is its own text wherever it goes (JSON, the REST API, the
statistics' records on the wire) and compares equal to it (`status == "running"`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


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


def shown_status(row: Mapping[str, Any]) -> str:
    """Storm's INACTIVE: a running topology whose spouts were deactivated; Storm's
    KILLED during a kill's wait: "killing"; REBALANCING during a rebalance's wait."""
    if row.get("killing") and row["status"] in (TopologyStatus.RUNNING, TopologyStatus.STARTING):
        return "killing"
    if row.get("rebalancing") and row["status"] == TopologyStatus.RUNNING:
        return "rebalancing"
    if row["status"] == TopologyStatus.RUNNING and row.get("active") is False:
        return "inactive"
    return str(row["status"])
