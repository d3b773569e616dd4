"""How features above the runtime hook into it without the runtime naming them: plan
extensions (stormish.state registers its checkpointing; runtime.plan calls each for
every plan), and `DATA_ENV`, the variable naming a worker's data directory, which the
local cluster and supervisors set and the features that keep data (state, spout
journals, latched edges) read, with `RESTART_ENV` on a worker started again. A leaf of
the core: importing it imports nothing of the engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .topology import ComponentSpec

# A worker's data directory, kept across its restarts (set by whoever starts the worker:
# the local cluster, a supervisor).
DATA_ENV = "STORMISH_WORKER_DATA"
# Set ("1") for a worker started again after it died or was killed (the local cluster, a
# supervisor): what it kept in its data directory is its own to restore (latched edges);
# a first start ignores what a former run of the same topology left there.
RESTART_ENV = "STORMISH_WORKER_RESTARTED"

# (components, conf, topology name, the components on a cycle) -> None, changing the
# plan's copies of the components in place
PlanExtension = Callable[["dict[str, ComponentSpec]", Mapping[str, Any], str, set[str]], None]
PLAN_EXTENSIONS: list[PlanExtension] = []


def extend_plans(extension: PlanExtension) -> None:
    """Have every plan built call `extension` (once per extension)."""
    if extension not in PLAN_EXTENSIONS:
        PLAN_EXTENSIONS.append(extension)
