"""The Kafka spout's feed: one thread that owns the consumer, so `next_tuple` never waits
on the network.

It polls in batches while fewer than `max_buffered` records wait for the spout, and
hands over events through `inbox` (a deque, the spout's thread pops it):
("assigned", {tp: start}), ("revoke", tps, token), ("records", [record, ...]) and
("high", {tp: high watermark}). The spout's commands (commit, pause, resume, released)
come the other way through `commands`.

A revoke waits here, inside the consumer's rebalance callback, on the feed's own thread:
the spout stops emitting for those partitions, waits for their trees in flight (its
acks arrive on its own thread, which is never blocked), commits, then answers
"released"; after `revoke_timeout` the feed gives up waiting and the partitions go with
what was committed by then (the next owner replays the rest: at least once).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .client import start_offset

log = logging.getLogger("stormish.kafka")
HIGH_EVERY = 0.2  # seconds between high-watermark reports (lag, stop_at_end)


class Feed:
    def __init__(
        self,
        make_client: Callable[[], Any],
        topics: list[str] | None,
        pattern: str | None,
        first_poll_offset: str,
        metadata: str,
        batch: int = 500,
        max_buffered: int = 10_000,
        revoke_timeout: float = 30.0,
        name: str = "kafka-feed",
        commit_polled: bool = False,
    ):
        self.make_client = make_client
        self.topics, self.pattern = topics, pattern
        self.mode, self.metadata = first_poll_offset, metadata
        self.batch, self.max_buffered, self.revoke_timeout = batch, max_buffered, revoke_timeout
        # at_most_once: each polled batch is committed (synchronously) here, before the
        # spout can see any of its records (queued for this thread, it was committed
        # after the spout had emitted them: a crash then processed them twice)
        self.commit_polled = commit_polled
        self.inbox: collections.deque = collections.deque()
        self.commands: collections.deque = collections.deque()
        self.handed = 0  # records put in the inbox ...
        self.taken = 0  # ... and taken by the spout (its thread counts them)
        self.error: BaseException | None = None
        self._wake = threading.Event()
        self._stop = False
        self._closing = False
        # the spout is deactivated (its next_tuple is not called): a revoke does not wait
        # for it; the partitions go with what it committed when it was deactivated
        self.passive = False
        self._released: set[int] = set()
        self._waiting: int | None = None  # the revoke whose release is awaited now
        self._token = 0
        self._assigned: set[tuple[str, int]] = set()
        self._paused: set[tuple[str, int]] = set()  # paused at the consumer by the spout
        self._client: Any = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._client = self.make_client()
        self._client.subscribe(self.topics, self.pattern, self._on_assign, self._on_revoke)
        self._thread.start()

    def command(self, cmd: tuple) -> None:
        """From the spout's thread."""
        self.commands.append(cmd)
        self._wake.set()

    def close(self, final: dict | None, timeout: float = 30.0) -> None:
        """Commit `final` (synchronously), leave the group and stop the thread."""
        if final:
            self.command(("commit", final, True))
        self._closing = True
        self._stop = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        client = self._client
        next_high = 0.0
        try:
            while not self._stop:
                self._run_commands()
                if self.handed - self.taken < self.max_buffered:
                    records = client.poll(self.batch, 0.05)
                    if records and self.commit_polled and not self._commit_polled(client, records):
                        # not committed (a rebalance under way): at most once allows them
                        # lost, not processed here and again by the next owner
                        log.warning(
                            "Kafka: %d records polled and not committed (at_most_once): "
                            "dropped, never processed twice",
                            len(records),
                        )
                        records = []
                    if records:
                        self.handed += len(records)
                        self.inbox.append(("records", records))
                else:
                    self._wake.wait(0.01)
                    self._wake.clear()
                now = time.monotonic()
                if now >= next_high and self._assigned:
                    # after the records polled so far: each position covers what is queued
                    tps = list(self._assigned)
                    highs, positions = client.high_watermarks(tps), client.positions(tps)
                    self.inbox.append(("high", highs, positions))
                    next_high = now + HIGH_EVERY
        except BaseException as exc:  # noqa: BLE001 - handed to the spout, which raises it
            self.error = exc
        finally:
            self._run_commands()
            try:
                client.close()
            except Exception as exc:  # noqa: BLE001 - closing: say it, go on
                log.warning("closing the Kafka consumer: %s", exc)

    def _commit_polled(self, client: Any, records: list) -> bool:
        """Commit past `records` (synchronously); False when the commit failed."""
        ends: dict[tuple[str, int], int] = {}
        for r in records:
            tp = (r[0], r[1])
            if tp in self._assigned and r[2] + 1 > ends.get(tp, -1):
                ends[tp] = r[2] + 1
        return not ends or bool(client.commit(ends, True, self.metadata))

    def _run_commands(self) -> None:
        commands, client = self.commands, self._client
        while commands:
            cmd = commands.popleft()
            kind = cmd[0]
            if kind == "commit":
                # only partitions still ours: a late commit must not move another
                # member's position (Kafka checks the generation, not the partition)
                mine = {tp: o for tp, o in cmd[1].items() if tp in self._assigned}
                if mine:
                    client.commit(mine, cmd[2], self.metadata)
            elif kind == "pause":
                client.pause(cmd[1])
                self._paused.update(cmd[1])
            elif kind == "resume":
                client.resume(cmd[1])
                self._paused.difference_update(cmd[1])
            elif kind == "released" and cmd[1] == self._waiting:
                # only the awaited one: a release of a revoke not waited on (the spout
                # was deactivated) or given up on is moot, and was kept for good
                self._released.add(cmd[1])

    def _on_assign(self, tps: list[tuple[str, int]]) -> dict:
        committed = self._client.committed(tps)
        starts = {tp: start_offset(self.mode, committed.get(tp), self.metadata) for tp in tps}
        self._assigned.update(tps)
        self.inbox.append(("assigned", starts))
        return starts

    def _on_revoke(self, tps: list[tuple[str, int]]) -> None:
        try:
            self._revoke(tps)
        finally:
            self._assigned.difference_update(tps)
            # librdkafka keeps a partition's pause through the revoke: given back to this
            # consumer it stayed paused, while the spout's new lane for it is not (it never
            # resumed it: the partition was read no more). Resumed while still assigned.
            paused = [tp for tp in tps if tp in self._paused]
            if paused:
                self._paused.difference_update(paused)
                self._client.resume(paused)

    def _revoke(self, tps: list[tuple[str, int]]) -> None:
        self._token += 1
        token = self._token
        self.inbox.append(("revoke", list(tps), token))
        if self._closing or self.passive:
            self._run_commands()  # the spout committed what it had when it stopped
            return
        deadline = time.monotonic() + self.revoke_timeout
        self._waiting = token
        while token not in self._released and time.monotonic() < deadline:
            if self._closing or self.passive:
                break
            self._wake.wait(0.005)
            self._wake.clear()
            self._run_commands()
        if token not in self._released and not (self._closing or self.passive):
            log.warning(
                "Kafka partitions %s revoked before their trees in flight completed "
                "(%.0f s): the next owner replays them",
                tps,
                self.revoke_timeout,
            )
        self._waiting = None
        self._released.discard(token)
