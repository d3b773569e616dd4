"""The checkpoint spout (Storm's CheckpointSpout): the shell around `CheckpointDriver`.

The engine adds one task of it, `__checkpoint`, to a topology with a stateful bolt.
It keeps its transaction in its own state (namespace `__checkpoint-TASK`), committed
before each action goes out, so that a restarted spout resolves what it left: a
PREPARING transaction is rolled back, a COMMITTING one rolled forward.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..component import Spout
from .factory import open_state
from .protocol import CHECKPOINT_FIELDS, CHECKPOINT_STREAM, CheckpointDriver, Emit, TxState

log = logging.getLogger("stormish.state")
CHECKPOINT_COMPONENT = "__checkpoint"
INTERVAL = "topology.state.checkpoint.interval.ms"
TX_KEY = "__state"


class CheckpointSpout(Spout):
    streams = {CHECKPOINT_STREAM: CHECKPOINT_FIELDS}

    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        self._state = open_state(conf, context)
        saved = self._state.get(TX_KEY)
        tx = TxState() if saved is None else TxState(*saved)
        if saved is None:
            self._save(tx)
        self._driver = CheckpointDriver(tx, conf[INTERVAL])
        self._now = context.clock.now

    def next_tuple(self) -> None:
        self._carry_out(self._driver.poll(self._now()))

    def ack(self, msg_id: Any) -> None:
        self._carry_out(self._driver.ack(msg_id))

    def fail(self, msg_id: Any, failure: Any = None) -> None:
        log.info("checkpoint txid %s failed (%s): recovering", msg_id, failure)
        self._carry_out(self._driver.fail(msg_id))

    def close(self) -> None:
        self._state.close()

    def _carry_out(self, out: list[Any]) -> None:
        if out:
            log.debug("checkpoint: %s", out)
        for step in out:
            if isinstance(step, Emit):
                self.emit((step.txid, step.action), CHECKPOINT_STREAM, msg_id=step.txid)
            else:
                self._save(step.tx)

    def _save(self, tx: TxState) -> None:
        self._state.put(TX_KEY, (tx.txid, tx.phase))
        self._state.commit()

    def transaction(self) -> TxState:
        """Where the protocol stands (for tests and statistics)."""
        return self._driver.tx
