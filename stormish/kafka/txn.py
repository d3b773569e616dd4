"""The transactions of a KafkaSink task, moved on without blocking its turn.

A transaction opens with the first tuple produced after the last one ended, takes at most
`max_records` tuples and lasts at most `max_secs`, then commits; a delivery error of any
of its records aborts it instead. Its tuples are acked when the commit succeeds and failed
(with the reason) when it aborts, so a replay upstream re-sends exactly an aborted batch
and a `read_committed` consumer sees each committed record once. librdkafka's
`commit_transaction` and `abort_transaction` block until the producer's queue is flushed
and the coordinator answers; the sink calls them from `Bolt.on_turn` only once every
record of the transaction has its delivery report (served by `poll(0)` turn by turn,
input held meanwhile), so what is left to wait for is one round trip to the transaction
coordinator (EndTxn), bounded by `end_timeout`. Calling them with a zero timeout and
again to resume (librdkafka allows it) was measured to crash the process: with
confluent-kafka 2.16 against Tansu 0.6 about one commit in a few hundred hit librdkafka's
assertion "Invalid transaction state transition CommittingTransaction -> AbortedNotAcked".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

IDLE, OPEN, COMMITTING, ABORTING = "idle", "open", "committing", "aborting"
_VERB = {COMMITTING: "commit", ABORTING: "abort"}


class Transaction:
    """One task's transactional producer: `open_for` each tuple, `turn` each loop turn."""

    def __init__(
        self,
        producer: Any,
        kafka_exception: type[BaseException],
        max_records: int,
        max_secs: float,
        ack: Callable[[Any], None],
        fail: Callable[..., None],
        name: str,
        end_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.producer = producer
        self.kafka_exception = kafka_exception
        self.max_records, self.max_secs = max_records, max_secs
        self.ack, self.fail, self.name, self.clock = ack, fail, name, clock
        self.end_timeout = end_timeout
        self.state = IDLE
        self.tuples: list[Any] = []
        self.began = 0.0
        self.error: str | None = None
        self.committed = 0  # transactions, for tests and statistics
        self.aborted = 0

    def init(self, timeout: float) -> None:
        """Register the transactional id (fences an older producer with the same id)."""
        self.producer.init_transactions(timeout)

    def open_for(self, tup: Any) -> bool:
        """Add a tuple to the open transaction (opening one when none is); False when it
        cannot join now (full, or committing or aborting): hold it and try later."""
        if self.state == IDLE:
            self.producer.begin_transaction()
            self.state, self.began, self.error = OPEN, self.clock(), None
        elif self.state != OPEN or len(self.tuples) >= self.max_records:
            return False
        self.tuples.append(tup)
        return True

    def unadd(self) -> None:
        """The last tuple added was not produced after all."""
        self.tuples.pop()

    def broken(self, reason: str) -> None:
        """A record of the transaction was not delivered: it will abort."""
        if self.error is None:
            self.error = reason

    def turn(self) -> bool:
        """Move on; True while input must be held (a commit or abort in progress)."""
        if self.state == OPEN:
            if self.error is not None:
                self.state = ABORTING
            elif len(self.tuples) >= self.max_records or self.clock() - self.began >= self.max_secs:
                self.state = COMMITTING
            else:
                return False
        if len(self.producer):  # delivery reports to come: served by poll(0)
            self.producer.poll(0)
            return True
        if self.state == COMMITTING and self.error is not None:
            # a report that came while it waited to commit: a record librdkafka failed
            # before it joined the transaction (an unknown topic's) does not fail the
            # commit, so the commit would ack a tuple whose record is nowhere
            self.state = ABORTING
        if self.state == COMMITTING:
            self._end(self.producer.commit_transaction, self.end_timeout)
        if self.state == ABORTING:
            self._end(self.producer.abort_transaction, self.end_timeout)
        return self.state != IDLE

    def finish(self, timeout: float) -> None:
        """At cleanup: end what is open within `timeout` (commit, or abort after an error)."""
        if self.state in (OPEN, COMMITTING):
            self.producer.flush(timeout)  # every report served: an error is known
            self.state = COMMITTING if self.error is None else ABORTING
        try:
            if self.state == COMMITTING:
                self._end(self.producer.commit_transaction, timeout)
            if self.state == ABORTING:
                self._end(self.producer.abort_transaction, timeout)
        except RuntimeError:
            pass  # its tuples were failed; the task is stopping anyway
        if self.state != IDLE:
            self._settle(f"{self.name}: stopped before its transaction ended", ok=False)

    def _end(self, call: Callable[[float], None], timeout: float) -> None:
        try:
            call(timeout)
        except self.kafka_exception as exc:
            err = exc.args[0]
            if err.retriable():
                return  # resumed next turn
            reason = f"{self.name}: transaction {_VERB[self.state]} failed: {err.str()}"
            if self.state == COMMITTING and err.txn_requires_abort():
                self.error, self.state = reason, ABORTING
                return
            self._settle(reason, ok=False)
            raise RuntimeError(reason) from exc  # fatal (fenced, ...): the task ends
        if self.state == COMMITTING and self.error is not None:  # reported during the call
            self.committed += 1
            self._settle(self.error, ok=False)  # replayed: those delivered come twice
        elif self.state == COMMITTING:
            self.committed += 1
            self._settle(None, ok=True)
        else:
            self.aborted += 1
            self._settle(self.error or f"{self.name}: transaction aborted", ok=False)

    def _settle(self, reason: str | None, ok: bool) -> None:
        tuples, self.tuples, self.state = self.tuples, [], IDLE
        for t in tuples:
            if ok:
                self.ack(t)
            else:
                self.fail(t, reason)
