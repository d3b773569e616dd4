"""JetStreamSink: publish each input to JetStream, ack it on its PubAck.

An input is acked only when the stream has stored its message (the PubAck) and failed,
with the reason, on an error or when no PubAck came within `publish_timeout_secs`: the
spout upstream then replays it (at-least-once into the stream; JetStream's duplicate
window can drop the repeats if a header `Nats-Msg-Id` is set through `headers_field`).

Backpressure, not buffering, and never a wait inside a turn: `execute` hands the publish
to the loop thread and returns. PubAcks are settled in `Bolt.on_turn`, which the bolt
loop calls at the start of every turn, input or not; the loop thread wakes the task
(`context.wake`) when outcomes come back, so they settle promptly with no tick. At most
`max_in_flight` publishes wait for a PubAck: while that many do, `on_turn` returns True,
the task takes no input and counts as under backpressure, its receive queue fills and
the engine holds its upstream back (Storm's backpressure). Inputs a turn took past the
bound wait in order in the sink (at most one turn's takes) until PubAcks make room.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from ..component import Bolt
from ..tuple import Tuple

CLOSE_SECS = 10.0


class JetStreamSink(Bolt):
    """Publishes field `value_field` (bytes, or str as UTF-8) of each input to `subject`
    (or to the subject in field `subject_field`), with the headers dict in
    `headers_field` if given."""

    outputs: Any = []

    def __init__(
        self,
        servers: str | Sequence[str] | Any,
        subject: str | None = None,
        subject_field: str | None = None,
        value_field: str = "value",
        headers_field: str | None = None,
        max_in_flight: int = 1000,
        publish_timeout_secs: float = 5.0,
        reconnect_attempts: int | None = None,
        reconnect_wait_secs: float = 2.0,
    ):
        if (subject is None) == (subject_field is None):
            raise ValueError("JetStreamSink needs exactly one of subject= or subject_field=")
        if (
            not isinstance(max_in_flight, int)
            or isinstance(max_in_flight, bool)
            or max_in_flight < 1
        ):
            raise ValueError(
                f"JetStreamSink max_in_flight= must be an integer >= 1, got {max_in_flight!r}"
            )
        if not isinstance(publish_timeout_secs, (int, float)) or publish_timeout_secs <= 0:
            raise ValueError(
                f"JetStreamSink publish_timeout_secs= must be > 0, got {publish_timeout_secs!r}"
            )
        from .client import check_reconnect

        check_reconnect("JetStreamSink", reconnect_attempts, reconnect_wait_secs)
        self.reconnect_attempts = reconnect_attempts
        self.reconnect_wait_secs = float(reconnect_wait_secs)
        self.servers = servers
        self.subject, self.subject_field = subject, subject_field
        self.value_field, self.headers_field = value_field, headers_field
        self.max_in_flight = max_in_flight
        self.publish_timeout_secs = float(publish_timeout_secs)

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        # publishes past the bound, ready to go, in input order
        self.held: deque[tuple[str, bytes, Any, Tuple]] = deque()
        opener = getattr(self.servers, "publisher", None)
        if opener is not None:
            self.out = opener(self)
        else:
            from .publisher import NatsPublisher

            self.out = NatsPublisher(self, getattr(context, "wake", None))

    def execute(self, tup: Tuple) -> None:
        if tup.is_tick:  # a tick the topology asked for is not a message
            return
        try:
            subject = self.subject or tup[self.subject_field]  # type: ignore[index]
            value = tup[self.value_field]
            headers = tup[self.headers_field] if self.headers_field else None
        except (KeyError, IndexError, ValueError) as e:
            self.fail(tup, f"JetStreamSink: input from {tup.source_component!r}: {e}")
            return
        if isinstance(value, str):
            value = value.encode()
        elif not isinstance(value, (bytes, bytearray, memoryview)):
            self.fail(
                tup,
                f"JetStreamSink: field {self.value_field!r} must be bytes or str, "
                f"got {type(value).__name__}",
            )
            return
        if self.held or self.out.in_flight >= self.max_in_flight:
            self.held.append((subject, bytes(value), headers, tup))
        else:
            self.out.publish(subject, bytes(value), headers, tup)

    def on_turn(self) -> bool:
        """Settle the PubAcks that came back, publish what was held while there is room;
        True (take no input) while `max_in_flight` publishes await their PubAck."""
        out = self.out
        if out.done:
            self._settle()
            closed = getattr(out, "closed", None)
            error = closed() if closed is not None else None
            if error is not None:  # no reconnect within reconnect_attempts: the task ends
                raise error
        if self.held:
            self._release()
        return out.in_flight >= self.max_in_flight

    def _settle(self) -> None:
        ack, fail = self.ack, self.fail
        for tup, error in self.out.take_done():
            if error is None:
                ack(tup)
            else:
                fail(tup, error)

    def _release(self) -> None:
        held, out, most = self.held, self.out, self.max_in_flight
        while held and out.in_flight < most:
            out.publish(*held.popleft())

    def cleanup(self) -> None:
        """Publish what is held and wait for the PubAcks, up to CLOSE_SECS (blocking is
        fine here: the task is stopping), so a clean stop settles what the sink took."""
        out = getattr(self, "out", None)
        if out is None:
            return
        deadline = time.monotonic() + CLOSE_SECS
        while (out.in_flight or self.held) and time.monotonic() < deadline:
            out.wait(0.05)
            self._settle()
            self._release()
        out.close(CLOSE_SECS)
