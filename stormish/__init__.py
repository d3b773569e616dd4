"""stormish: Storm's model (spouts, bolts, groupings, acking) and Storm 2.0's
backpressure, in Python.

The public API lives here and in `stormish.testing`; everything under `runtime/`,
`transport/`, `cluster/` and `spark/` is internal.
"""

from .component import BasicBolt, Bolt, Spout
from .errors import (
    ConfigError,
    FailedException,
    ReportedFailedException,
    StormishError,
    TopologyError,
    TopologyFileError,
    WorkerError,
)
from .failure import Failure
from .local import LocalCluster
from .schema import Schema
from .settle import ACK, DEAD_LETTER, FAIL, Result
from .state import KeyValueState, StatefulBolt
from .topology import Declarer, LaneSpec, Topology
from .tuple import Traced, Tuple, traced

__version__ = "0.1.0"

__all__ = [
    "ACK",
    "DEAD_LETTER",
    "FAIL",
    "Result",
    "Schema",
    "BasicBolt",
    "Bolt",
    "ConfigError",
    "Declarer",
    "FailedException",
    "KeyValueState",
    "LaneSpec",
    "Failure",
    "LocalCluster",
    "ReportedFailedException",
    "Spout",
    "StatefulBolt",
    "StormishError",
    "Topology",
    "TopologyError",
    "TopologyFileError",
    "Traced",
    "Tuple",
    "traced",
    "WorkerError",
]
