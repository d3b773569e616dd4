"""The nats-py side: a pull consumer and a publisher that live on the worker's loop
thread (loop.py) and meet the executor threads only through bounded hand-offs.

Inbox (loop -> spout): a deque of delivered messages; what it holds counts against the
spout's Window, so it never holds more than `max_ack_pending` messages. Settles (spout ->
loop): one `call` per `next_tuple` turn carrying every ack/nak/term/progress gathered
since the last, never one wake-up of the loop per message.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from . import loop as loops
from .pull import FORGET, NAK, PROGRESS, ConsumerPosition, Window, reached_end

log = logging.getLogger("stormish.nats")
FETCH_TIMEOUT = 0.5  # seconds a pull request lingers on an idle consumer
OPEN_TIMEOUT = 15.0


def import_nats() -> Any:
    """nats-py, or an error that says how to install it."""
    try:
        import nats  # absolute: the client library, not this package
    except ImportError as e:
        raise ImportError(
            "stormish.nats needs the nats-py client: pip install 'stormish[nats]'"
        ) from e
    return nats


def server_list(servers: str | Sequence[str]) -> list[str]:
    return [servers] if isinstance(servers, str) else list(servers)


class NatsSource:
    """A durable pull consumer for one spout task. `take()`, `settle()` and `ended()`
    are called from the spout's thread and never block."""

    def __init__(self, spout: Any) -> None:
        import_nats()
        self.spout = spout
        self.window = Window(spout.max_ack_pending, spout.batch)
        self.inbox: deque[Any] = deque()
        self.end_seq: int | None = None
        self._ended = False
        self.error: BaseException | None = None
        self.loop = loops.acquire()
        self._space = asyncio.Event()
        self._task: Future | None = None
        try:
            self.loop.submit(self._open()).result(OPEN_TIMEOUT)
        except BaseException:
            loops.release(self.loop)
            raise
        self._task = self.loop.submit(self._fetch_loop())

    async def _open(self) -> None:
        nats = import_nats()
        self._space = asyncio.Event()
        self.nc = await nats.connect(server_list(self.spout.servers), connect_timeout=5)
        try:
            await self._bind(nats)
        except BaseException:
            await self.nc.close()
            raise

    async def _bind(self, nats: Any) -> None:
        """The stream's end, the durable consumer (created, or updated to these settings), the
        inbox."""
        from nats.js.api import AckPolicy, ConsumerConfig

        s = self.spout
        self.js = self.nc.jetstream()
        try:
            info = await self.js.stream_info(s.stream)
        except nats.js.errors.NotFoundError:
            raise LookupError(
                f"JetStreamSpout: no stream {s.stream!r} at {server_list(s.servers)} "
                "(create it first: nats stream add, or js.add_stream)"
            ) from None
        self.end_seq = info.state.last_seq
        config = ConsumerConfig(
            durable_name=s.durable,
            filter_subject=s.subject,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=s.ack_wait_secs,
            max_deliver=s.max_deliver if s.max_deliver is not None else -1,
            max_ack_pending=s.max_ack_pending,
        )
        await self.js.add_consumer(s.stream, config)
        # JetStream's pull protocol by hand: a request for `want` messages to the
        # consumer's MSG.NEXT subject, the messages (then a status, if it ends early) to
        # an inbox this subscription's callback reads. nats-py's fetch() waits on each
        # message with a task and a timer of its own: measured, most of the loop's time.
        self.next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{s.stream}.{s.durable}"
        self.reply = self.nc.new_inbox()
        self._left = self.received = 0
        self._request_done = asyncio.Event()
        self.sub = await self.nc.subscribe(self.reply, cb=self._on_msg)

    async def _on_msg(self, msg: Any) -> None:
        if not msg.reply:  # a status (404 none, 408 expired, 409 ...): the request ended
            self._left = 0
            self._request_done.set()
            return
        self.inbox.append(msg)
        self.received += 1
        self.window.delivered(1)
        self._left -= 1
        if self._left <= 0:
            self._request_done.set()

    async def _fetch_loop(self) -> None:
        window, expires = self.window, int(FETCH_TIMEOUT * 1e9)
        while True:
            want = window.want()
            if want == 0:
                self._space.clear()
                await self._space.wait()
                continue
            before = self.received
            self._left = want
            self._request_done.clear()
            request = json.dumps({"batch": want, "expires": expires}).encode()
            try:
                await self.nc.publish(self.next_subject, request, reply=self.reply)
                try:
                    await asyncio.wait_for(self._request_done.wait(), FETCH_TIMEOUT * 4)
                except TimeoutError:
                    pass  # the status was lost (a reconnect): ask again
                if self.spout.stop_at_end and not self._ended and self.received == before:
                    await self._check_end()  # a request that brought nothing
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - handed to the spout's thread
                self.error = e
                return

    async def _check_end(self) -> None:
        ci = await self.js.consumer_info(self.spout.stream, self.spout.durable)
        pos = ConsumerPosition(
            ci.delivered.stream_seq or 0,
            ci.num_ack_pending or 0,
            ci.num_pending or 0,
            ci.num_redelivered or 0,
        )
        if reached_end(self.end_seq or 0, pos, self.window.outstanding):
            self._ended = True

    # -- the spout's thread -----------------------------------------------------------
    def take(self) -> list | None:
        """Up to a batch of rows (subject, data, headers, stream seq, msg), or None."""
        inbox = self.inbox
        if inbox:
            pop = inbox.popleft
            rows = []
            for _ in range(min(len(inbox), self.window.batch)):
                m = pop()
                rows.append((m.subject, m.data, m.headers, _stream_seq(m), m))
            return rows
        if self.error is not None:
            raise self.error
        return None

    def settle(self, ops: list) -> None:
        """`ops`: (op, msg, delay) from pull's ACK/NAK/TERM/PROGRESS; sent in one task."""
        self.loop.submit(self._send(ops))

    def ended(self) -> bool:
        return self._ended

    async def _send(self, ops: list) -> None:
        # nc.publish only appends to the client's write buffer while connected: a batch
        # of acks costs one task and no round trip (as Msg.ack, without its checks)
        publish = self.nc.publish
        freed = 0
        for op, msg, delay in ops:
            if op == FORGET:
                freed += 1
                continue
            if op == NAK and delay:
                payload = b"-NAK " + json.dumps({"delay": int(delay * 1e9)}).encode()
            else:
                payload = op.encode()
            try:
                await publish(msg.reply, payload)
            except Exception as e:  # noqa: BLE001 - the server redelivers after ack_wait
                log.warning("JetStream %s for %s failed: %s", op, msg.reply, e)
            if op != PROGRESS:
                freed += 1
        if freed:
            self.window.settled(freed)
            self._space.set()

    def close(self) -> None:
        try:
            if self._task is not None:
                self._task.cancel()
            self.loop.submit(self._close()).result(OPEN_TIMEOUT)
        except Exception as e:  # noqa: BLE001 - closing: say so, go on
            log.warning("closing the JetStream consumer: %s", e)
        finally:
            loops.release(self.loop)

    async def _close(self) -> None:
        await self.nc.flush()
        await self.nc.close()


def _stream_seq(msg: Any) -> int:
    """The stream sequence from the ack subject `$JS.ACK.<stream>.<consumer>.<delivered>.
    <sseq>...` without building nats-py's Metadata (a dataclass per message)."""
    parts = msg.reply.split(".")
    if len(parts) == 9:
        return int(parts[5])
    return msg.metadata.sequence.stream
