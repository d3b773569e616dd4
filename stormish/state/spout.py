"""The checkpoint spout (Storm's CheckpointSpout): the shell around `CheckpointDriver`.

The engine adds one task of it, `__checkpoint`, to a topology with a stateful bolt.
It keeps its transaction in its own state (namespace `__checkpoint-TASK`), committed
before each action goes out, so that a restarted spout resolves what it left: a
PREPARING transaction is rolled back, a COMMITTING one rolled forward. It numbers its
emissions (the third field), larger for each, across its restarts (it counts its
processes in its state): the bolts align copies of one emission and tell a late copy of
an earlier one (protocol.BarrierAligner).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..component import Spout
from .factory import open_state
from .protocol import (
    CHECKPOINT_FIELDS,
    CHECKPOINT_STREAM,
    CheckpointDriver,
    Emit,
    TxState,
    emission_number,
)

log = logging.getLogger("stormish.state")
CHECKPOINT_COMPONENT = "__checkpoint"
INTERVAL = "topology.state.checkpoint.interval.ms"
TX_KEY = "__state"
INCARNATION_KEY = "__incarnation"  # how many processes have run this spout: numbers emissions


class CheckpointSpout(Spout):
    streams = {CHECKPOINT_STREAM: CHECKPOINT_FIELDS}

    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        self._state = open_state(conf, context)
        saved = self._state.get(TX_KEY)
        tx = TxState() if saved is None else TxState(*saved)
        if saved is None:
            self._save(tx)
        self._incarnation = int(self._state.get(INCARNATION_KEY, 0)) + 1
        self._state.put(INCARNATION_KEY, self._incarnation)
        self._state.commit()
        self._emitted = 0
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
                self._emitted += 1
                number = emission_number(self._incarnation, self._emitted)
                self.emit((step.txid, step.action, number), CHECKPOINT_STREAM, msg_id=step.txid)
            else:
                self._save(step.tx)

    def _save(self, tx: TxState) -> None:
        self._state.put(TX_KEY, (tx.txid, tx.phase))
        self._state.commit()

    def transaction(self) -> TxState:
        """Where the protocol stands (for tests and statistics)."""
        return self._driver.tx
