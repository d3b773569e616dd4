"""How a bolt's input runs, chosen once when the task begins (`choose`), so that the bolt
loop (`BoltExecutor.step`) only takes input and hands each batch to `run`:

- `base.Raw`: the acker's rows, as they are (`execute_raw`);
- `per_tuple.PerTuple`: `execute` per tuple (Storm's);
- `user_batch.UserBatch`: the bolt's own `execute_batch` per batch taken;
- `settle_batch.SettleBatch`: formed batches whose results settle them (stormish.settle);
- `lanes.Lanes`: ordered_lanes edges on concurrent lanes, around one of the above.

Beside them: `screen.Screen` applies edge policies (ages, deadlines, what channels let
go) and `accounting.Accounts` counts what ran and settles lane tuples, once each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...component import Bolt
from .base import Execution, Raw
from .lanes import Lanes
from .per_tuple import PerTuple
from .settle_batch import SettleBatch
from .user_batch import UserBatch

if TYPE_CHECKING:
    from ..bolt_executor import BoltExecutor


def choose(ex: BoltExecutor) -> Execution:
    if ex.is_acker:
        return Raw(ex)
    if ex.batcher is not None:
        return SettleBatch(ex, ex.batcher)
    custom = type(ex.obj).execute_batch is not Bolt.execute_batch
    inner: Execution = UserBatch(ex) if custom else PerTuple(ex)
    pool = ex.lane_pool()
    return inner if pool is None else Lanes(ex, inner, pool)
