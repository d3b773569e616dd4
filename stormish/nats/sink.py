"""JetStreamSink: publish each input to JetStream, ack it on its PubAck.

An input is acked only when the stream has stored its message (the PubAck) and failed,
with the reason, on an error or when no PubAck came within `publish_timeout_secs`: the
spout upstream then replays it (at-least-once into the stream; JetStream's duplicate
window can drop the repeats if a header `Nats-Msg-Id` is set through `headers_field`).

Backpressure, not buffering: at most `max_in_flight` publishes wait for a PubAck. At the
bound `execute` waits for outcomes before it takes the next input, so the sink's
receive queue fills and the engine holds its upstream back (Storm's backpressure). The
sink runs on a thread of its own (`topology.executor.own.thread`) so that wait never
holds up another executor, and takes a tick every TICK_SECS to settle outcomes that
come back while no input arrives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..component import Bolt
from ..tuple import Tuple

TICK_SECS = 0.05
CLOSE_SECS = 10.0


class JetStreamSink(Bolt):
    """Publishes field `value_field` (bytes, or str as UTF-8) of each input to `subject`
    (or to the subject in field `subject_field`), with the headers dict in
    `headers_field` if given."""

    outputs: Any = []
    component_config = {
        "topology.executor.own.thread": True,
        "topology.tick.tuple.freq.secs": TICK_SECS,
    }

    def __init__(
        self,
        servers: str | Sequence[str] | Any,
        subject: str | None = None,
        subject_field: str | None = None,
        value_field: str = "value",
        headers_field: str | None = None,
        max_in_flight: int = 1000,
        publish_timeout_secs: float = 5.0,
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
        self.servers = servers
        self.subject, self.subject_field = subject, subject_field
        self.value_field, self.headers_field = value_field, headers_field
        self.max_in_flight = max_in_flight
        self.publish_timeout_secs = float(publish_timeout_secs)

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        opener = getattr(self.servers, "publisher", None)
        if opener is not None:
            self.out = opener(self)
        else:
            from .publisher import NatsPublisher

            self.out = NatsPublisher(self)

    def execute(self, tup: Tuple) -> None:
        out = self.out
        if out.done:
            self._settle()
        if tup.is_tick:
            return
        while out.in_flight >= self.max_in_flight:
            out.wait(self.publish_timeout_secs)
            self._settle()
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
        out.publish(subject, bytes(value), headers, tup)

    def _settle(self) -> None:
        ack, fail = self.ack, self.fail
        for tup, error in self.out.take_done():
            if error is None:
                ack(tup)
            else:
                fail(tup, error)

    def cleanup(self) -> None:
        out = getattr(self, "out", None)
        if out is None:
            return
        import time

        deadline = time.monotonic() + CLOSE_SECS
        while out.in_flight and time.monotonic() < deadline:
            out.wait(0.05)
            self._settle()
        out.close(CLOSE_SECS)
