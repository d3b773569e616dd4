"""JetStreamSpout: a durable JetStream pull consumer as a reliable Storm spout.

Storm's ack/fail map onto JetStream's per-message acknowledgements (docs/connectors.md):
a tree that completes acks its message (`+ACK`), a failed tree naks it with
`nak_delay_secs` (`-NAK`, JetStream redelivers it), a failed tree of the message's
`max_deliver`-th delivery (JetStream's count, over every task and run of the durable) is
dead-lettered by the spout and terms the message (`+TERM`, never delivered again), and a
bolt's `reset_timeout` on a tuple of the tree tells JetStream the message is still being
worked on (`+WPI`, ack_wait starts again).

The message id is the stream sequence: the same on every redelivery. The bound is real:
at `max_ack_pending` un-acked deliveries the source stops fetching (pull.Window), and the
consumer is created with the same MaxAckPending, so the server holds it too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..component import Spout
from .pull import ACK, FORGET, PROGRESS, TERM, settle_failure

FIELDS = ["subject", "value", "headers", "sequence"]


class JetStreamSpout(Spout):
    """Emits `subject, value, headers, sequence` (value: bytes; headers: a dict or None)
    for each message of `stream` matching `subject`, read through the durable pull
    consumer `durable` (created when absent; tasks of one spout share it). With
    `stop_at_end` the spout finishes once everything up to the stream's last sequence at
    open is delivered and acked: a finite run. `servers`: nats:// URLs (or a
    stormish.testing.MemoryJetStream for tests without a server)."""

    outputs = FIELDS

    def __init__(
        self,
        servers: str | Sequence[str] | Any,
        stream: str,
        subject: str,
        durable: str,
        max_ack_pending: int = 1000,
        batch: int = 256,
        ack_wait_secs: float = 30.0,
        nak_delay_secs: float | None = 1.0,
        max_deliver: int | None = None,
        stop_at_end: bool = False,
        reconnect_attempts: int | None = None,
        reconnect_wait_secs: float = 2.0,
        missing_stream_timeout_secs: float | None = 60.0,
    ):
        for name, value in (("stream", stream), ("subject", subject), ("durable", durable)):
            if not isinstance(value, str) or not value:
                raise ValueError(
                    f"JetStreamSpout {name}= must be a non-empty string, got {value!r}"
                )
        _positive_int("max_ack_pending", max_ack_pending)
        _positive_int("batch", batch)
        if max_deliver is not None:
            _positive_int("max_deliver", max_deliver)
        # bools are ints to Python, NaN passes every comparison, and an infinite wait
        # is no wait the server can be told (it takes nanoseconds as an integer)
        if not _finite(ack_wait_secs) or ack_wait_secs <= 0:
            raise ValueError(
                f"JetStreamSpout ack_wait_secs= must be a finite number > 0, got {ack_wait_secs!r}"
            )
        if nak_delay_secs is not None and (not _finite(nak_delay_secs) or nak_delay_secs < 0):
            raise ValueError(
                "JetStreamSpout nak_delay_secs= must be a finite number >= 0 or None, got "
                f"{nak_delay_secs!r}"
            )
        from .client import check_reconnect

        check_reconnect("JetStreamSpout", reconnect_attempts, reconnect_wait_secs)
        if missing_stream_timeout_secs is not None and (
            not _finite(missing_stream_timeout_secs) or missing_stream_timeout_secs < 0
        ):
            raise ValueError(
                "JetStreamSpout missing_stream_timeout_secs= must be a finite number >= 0 or "
                f"None (wait for ever), got {missing_stream_timeout_secs!r}"
            )
        self.reconnect_attempts = reconnect_attempts
        self.reconnect_wait_secs = float(reconnect_wait_secs)
        self.missing_stream_timeout_secs = missing_stream_timeout_secs
        self.servers = servers
        self.stream, self.subject, self.durable = stream, subject, durable
        self.max_ack_pending, self.batch = max_ack_pending, batch
        self.ack_wait_secs, self.nak_delay_secs = float(ack_wait_secs), nak_delay_secs
        self.max_deliver, self.stop_at_end = max_deliver, stop_at_end

    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        self.held: dict[int, Any] = {}  # stream sequence -> the delivery in a tree
        self.ops: list[tuple[str, Any, Any]] = []  # settles, sent once per next_tuple
        self.active = True
        opener = getattr(self.servers, "pull_source", None)
        if opener is not None:
            self.source = opener(self)
        else:
            from .client import NatsSource

            self.source = NatsSource(self)

    def next_tuple(self) -> None:
        if self.ops:
            self._flush()
        rows = self.source.take()
        if rows is None:
            if self.stop_at_end and not self.held and self.source.ended():
                self.finish()
            return
        held, emit = self.held, self.emit
        for subject, data, headers, seq, token in rows:
            old = held.get(seq)
            if old is not None:  # redelivered (ack_wait passed) while its tree runs
                self.ops.append((FORGET, old, None))
            held[seq] = token
            emit((subject, data, headers, seq), msg_id=seq)

    def ack(self, msg_id: Any) -> None:
        token = self.held.pop(msg_id, None)
        if token is not None:
            self.ops.append((ACK, token, None))
            if len(self.ops) >= self.batch or not self.active:
                self._flush()

    def fail(self, msg_id: Any, failure: Any = None) -> None:
        token = self.held.pop(msg_id, None)
        if token is not None:
            op, delay = settle_failure(failure, self.nak_delay_secs)
            if op != TERM and self.max_deliver is not None:
                # JetStream's own count of deliveries, not this task's count of failures:
                # the failures of another task of the durable, or of an earlier run, count
                # too. A nak of the last delivery would be given up by the server unseen.
                deliveries, row = self.source.delivery(token)
                if deliveries >= self.max_deliver:
                    op, delay = TERM, None
                    error = None
                    if failure is not None:
                        error = failure.reason + (f": {failure.error}" if failure.error else "")
                    self.dead_letter(msg_id, row, error, deliveries)
            self.ops.append((op, token, delay))
            if len(self.ops) >= self.batch or not self.active:
                self._flush()

    def activate(self) -> None:
        self.active = True
        self.source.pause(False)

    def deactivate(self) -> None:
        """next_tuple is not called while inactive: settles go out as they come, and the
        source stops pulling (what it pulled would wait past ack_wait, be redelivered
        beside itself, and be emitted twice on activate)."""
        self.active = False
        self.source.pause(True)
        if self.ops:
            self._flush()

    def timeout_reset(self, msg_id: Any) -> None:
        token = self.held.get(msg_id)
        if token is not None:
            self.ops.append((PROGRESS, token, None))
            if not self.active:  # no next_tuple to send it before ack_wait passes
                self._flush()

    def close(self) -> None:
        source = getattr(self, "source", None)
        if source is None:
            return
        if self.ops:
            self._flush()
        source.close()

    def _flush(self) -> None:
        ops, self.ops = self.ops, []
        self.source.settle(ops)


def _finite(value: Any) -> bool:
    """A real number of seconds: not a bool (an int to Python), not NaN or infinite."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"JetStreamSpout {name}= must be an integer >= 1, got {value!r}")
