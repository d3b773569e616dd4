"""The sink's nats-py side: JetStream publishes with their PubAcks, on the loop thread.

The sink's thread appends requests to a deque and wakes the loop only when the loop's
publishing task sleeps (one wake-up per burst, not per message); the loop publishes
with `publish_async` (many in flight, no round trip each) and hands each outcome back
through a second deque, waking the sink's task (`context.wake`) once per batch of
outcomes the task has not yet looked at, so the task settles them in its next turn
instead of after an idle wait. Every outcome comes back: a PubAck, the server's error,
or a timeout after `publish_timeout_secs` (the sweeper), so the sink acks or fails each
input.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from . import loop as loops
from .client import OPEN_TIMEOUT, ConnectionLog, connect, import_nats, server_list

log = logging.getLogger("stormish.nats")
SWEEP_SECS = 0.25


class NatsPublisher:
    """`publish(subject, value, headers, tup)` and `take_done()` from the sink's thread;
    `in_flight` counts what was handed over and not yet taken back. `wake_task` (from
    any thread) ends the sink task's idle wait; None where nothing waits (a bare test)."""

    def __init__(self, sink: Any, wake_task: Callable[[], None] | None = None) -> None:
        import_nats()
        self.sink = sink
        self.wake_task = wake_task or _nothing
        # set by the loop thread when it wakes the task, cleared by the task before it
        # drains `done`: one wake-up per batch, and an outcome appended after the drain
        # always finds it clear (never a lost wake-up)
        self.woken = False
        self.requests: deque[tuple] = deque()
        self.done: deque[tuple[Any, str | None]] = deque()
        self.in_flight = 0
        self.ready = threading.Event()
        self.sleeping = False
        self.pending: dict[Any, tuple[Any, float]] = {}
        self.loop = loops.acquire()
        self._tasks: list[Future] = []
        try:
            self.loop.submit(self._open()).result(OPEN_TIMEOUT)
        except BaseException:
            loops.release(self.loop)
            raise
        self._tasks = [self.loop.submit(self._run()), self.loop.submit(self._sweep())]

    async def _open(self) -> None:
        sink = self.sink
        self.wake = asyncio.Event()
        self.conn = ConnectionLog(
            "JetStreamSink",
            server_list(sink.servers),
            getattr(sink, "reconnect_attempts", None),
            getattr(sink, "reconnect_wait_secs", 2.0),
        )
        self.nc = await connect(self.conn)
        # the sink bounds what is in flight itself; nats-py's own stall limit sits above it
        self.js = self.nc.jetstream(publish_async_max_pending=self.sink.max_in_flight + 1)

    # -- the sink's thread ------------------------------------------------------------
    def publish(self, subject: str, value: bytes, headers: Any, tup: Any) -> None:
        self.requests.append((subject, value, headers, tup))
        self.in_flight += 1
        if self.sleeping:
            self.sleeping = False
            self.loop.call(self.wake.set)

    def take_done(self) -> list[tuple[Any, str | None]]:
        self.woken = False
        done, out = self.done, []
        while done:
            out.append(done.popleft())
        self.in_flight -= len(out)
        return out

    def closed(self) -> ConnectionError | None:
        """The error to end the sink with once the connection is closed for good (no
        reconnect within `reconnect_attempts`); None while it is open or reconnecting."""
        nc = getattr(self, "nc", None)
        if nc is None or not nc.is_closed or self.conn.closing:
            return None
        return self.conn.closed_error()

    def wait(self, timeout: float) -> None:
        """Block until an outcome comes back (cleanup only: a turn never waits)."""
        self.ready.wait(timeout)
        self.ready.clear()

    # -- the loop thread ----------------------------------------------------------------
    async def _run(self) -> None:
        requests, publish = self.requests, self.js.publish_async
        while True:
            if not requests:
                self.sleeping = True
                self.wake.clear()
                if not requests:
                    await self.wake.wait()
                self.sleeping = False
                continue
            subject, value, headers, tup = requests.popleft()
            try:
                fut = await publish(subject, value, headers=headers)
            except Exception as e:  # noqa: BLE001 - the input fails with the reason
                self._forget_refused()
                self._outcome(tup, f"publish to {subject!r}: {e!r}")
                continue
            self.pending[fut] = (tup, time.monotonic() + self.sink.publish_timeout_secs)
            fut.add_done_callback(self._finished)

    def _forget_refused(self) -> None:
        """nats-py's publish_async registers its future and takes a slot of its pending
        limit before it publishes; a publish refused on the spot (a payload over the
        server's max_payload, a full reconnect buffer in an outage) leaves that future
        never done and the slot taken. After max_in_flight + 1 refusals its next
        publish_async waited for a slot for good, and the sink settled nothing more.
        Every future of this context that is not one of ours in flight is such a one:
        cancelled, it gives its slot back (its done callback)."""
        futures = getattr(self.js, "_publish_async_futures", None)
        if not futures:
            return
        for fut in list(futures.values()):
            if fut not in self.pending and not fut.done():
                fut.cancel()

    def _finished(self, fut: asyncio.Future) -> None:
        tup, _ = self.pending.pop(fut, (None, 0.0))
        if tup is None:
            return
        if fut.cancelled():
            self._outcome(tup, "publish cancelled")
        elif fut.exception() is not None:
            self._outcome(tup, f"no PubAck: {fut.exception()!r}")
        else:
            self._outcome(tup, None)

    def _outcome(self, tup: Any, error: str | None) -> None:
        self.done.append((tup, error))
        self.ready.set()
        if not self.woken:
            self.woken = True
            self.wake_task()

    async def _sweep(self) -> None:
        """Fail publishes whose PubAck is later than publish_timeout_secs."""
        while True:
            await asyncio.sleep(SWEEP_SECS)
            now = time.monotonic()
            late = [f for f, (_, deadline) in self.pending.items() if deadline <= now]
            for fut in late:
                if not fut.done():
                    fut.set_exception(TimeoutError("PubAck timed out"))

    def close(self, timeout: float) -> None:
        """Stop publishing and disconnect (the sink has waited for its PubAcks)."""
        try:
            self.loop.submit(self._close(timeout)).result(timeout + OPEN_TIMEOUT)
        except Exception as e:  # noqa: BLE001 - closing: say so, go on
            log.warning("closing the JetStream publisher: %s", e)
        finally:
            loops.release(self.loop)

    async def _close(self, timeout: float) -> None:
        for t in self._tasks:
            t.cancel()
        self.conn.closing = True
        if self.nc.is_connected:
            await self.nc.flush()
        await self.nc.close()


def _nothing() -> None:
    pass
