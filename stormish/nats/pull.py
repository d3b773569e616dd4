"""The JetStream spout's decisions, with no I/O: how much to fetch, how a tree's end
maps to a JetStream acknowledgement, and when a finite run has reached its end.

Both message sources (the nats-py one in client.py and the in-memory stand-in in
stormish.testing.jetstream) use these, so a unit test of the rules needs no server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# settle operations sent from the spout's thread to the source, with their JetStream acks
ACK, NAK, TERM, PROGRESS = "+ACK", "-NAK", "+TERM", "+WPI"
FORGET = ""  # only frees the delivery's place: a redelivery of its message replaced it


class Window:
    """The bound: un-acked deliveries held by this spout task (fetched, in the inbox, in
    a tree, or settled but not yet sent) never exceed `max_ack_pending`; each fetch asks
    for at most `batch`. At the bound `want()` is 0 and the source stops fetching.

    A fetch waits until a whole batch fits (or half the bound, when that is smaller):
    asking for whatever the last few acks freed would cost a pull request, and a round
    trip, per few messages once the spout runs at the bound."""

    __slots__ = ("max_ack_pending", "batch", "outstanding", "high", "refill")

    def __init__(self, max_ack_pending: int, batch: int):
        self.max_ack_pending = max_ack_pending
        self.batch = batch
        self.outstanding = 0
        self.high = 0  # the most ever outstanding at once (statistics, tests)
        self.refill = min(batch, max(1, max_ack_pending // 2))

    def want(self) -> int:
        free = self.max_ack_pending - self.outstanding
        return min(self.batch, free) if free >= self.refill else 0

    def delivered(self, n: int) -> None:
        self.outstanding += n
        if self.outstanding > self.high:
            self.high = self.outstanding

    def settled(self, n: int) -> None:
        """`n` deliveries acked, nak'ed or terminated: each frees a place."""
        self.outstanding -= n


def settle_failure(failure: Any, nak_delay: float | None) -> tuple[str, float | None]:
    """A failed tree: `term` when stormish dead-lettered it (final: JetStream must not
    deliver it again), else `nak` with the delay (None: redeliver at once)."""
    if failure is not None and getattr(failure, "dead_letter", False):
        return TERM, None
    return NAK, nak_delay


@dataclass(frozen=True)
class ConsumerPosition:
    """What the end rule reads from the consumer's info (JetStream's names)."""

    delivered_stream_seq: int  # the last stream sequence delivered (at least once)
    num_ack_pending: int  # delivered, not yet acked (nak'ed with a delay included)
    num_pending: int  # matching messages not yet delivered
    num_redelivered: int = 0


def reached_end(end_seq: int, pos: ConsumerPosition, outstanding: int) -> bool:
    """`stop_at_end`: everything up to `end_seq` (the stream's last sequence when the
    spout opened) has been delivered and nothing delivered is still un-acked, here or on
    the server. Messages published after the start do not hold the end back."""
    if outstanding or pos.num_ack_pending:
        return False
    return pos.delivered_stream_seq >= end_seq or pos.num_pending == 0
