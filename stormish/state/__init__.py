"""Stateful bolts with checkpoints (Storm's IStatefulBolt), public API.

    from stormish.state import StatefulBolt, KeyValueState

`StatefulBolt.init_state(state)` gets a `KeyValueState` as of the last committed
checkpoint; the engine runs Storm's checkpoint protocol (a `__checkpoint` spout, barriers
on the `$checkpoint` stream, prepare/commit/rollback) and holds the bolt's acks until
the checkpoint after them commits. The logic is pure (protocol.py, kv.py); bolt.py,
spout.py and wiring.py are the shells; sqlite.py and redis.py the stores.
docs/state.md describes it.
"""

from ..plugins import extend_plans
from .bolt import StatefulBolt
from .kv import KeyValueState
from .protocol import CHECKPOINT_STREAM
from .wiring import add_checkpointing

# a plug-in: the runtime does not name state; every plan gets its checkpointing from here
extend_plans(add_checkpointing)

__all__ = ["CHECKPOINT_STREAM", "KeyValueState", "StatefulBolt"]
