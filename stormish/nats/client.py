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
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from . import loop as loops
from .pull import FORGET, NAK, PROGRESS, ConsumerPosition, Window, reached_end

log = logging.getLogger("stormish.nats")
FETCH_TIMEOUT = 0.5  # seconds a pull request lingers on an idle consumer
OPEN_TIMEOUT = 15.0
CONNECT_TIMEOUT = 5
# A pull that ended early with nothing, again and again (the consumer or its stream is
# gone: 503 no responders; or the server refuses the request): the next waits this long,
# doubling up to BACKOFF_MOST, instead of being sent at once for ever.
BACKOFF_FIRST, BACKOFF_MOST = 0.1, 2.0
# The statuses that end a pull with nothing in the normal way: cheap and silent.
TIMED_OUT = "408"  # the request's `expires` passed
NO_MESSAGES = "404"  # with the description "No Messages"


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


def check_reconnect(owner: str, attempts: Any, wait: Any) -> None:
    """The connection options every NATS component takes, or a ValueError naming the bad
    one: `reconnect_attempts` None (for as long as the topology runs) or an integer >= 0
    (0: never), `reconnect_wait_secs` a finite number > 0."""
    if attempts is not None and (
        not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 0
    ):
        raise ValueError(
            f"{owner} reconnect_attempts= must be None (reconnect for as long as the "
            f"topology runs) or an integer >= 0, got {attempts!r}"
        )
    if (
        isinstance(wait, bool)
        or not isinstance(wait, int | float)
        or not wait > 0
        or wait == float("inf")
    ):
        raise ValueError(f"{owner} reconnect_wait_secs= must be a finite number > 0, got {wait!r}")


class Backoff:
    """Bounded exponential waits: `first`, doubling, at most `most`; `reset` after a
    success. Pure: the caller sleeps."""

    def __init__(self, first: float = BACKOFF_FIRST, most: float = BACKOFF_MOST) -> None:
        self.first, self.most = first, most
        self.next = first

    def delay(self) -> float:
        d = self.next
        self.next = min(self.most, d * 2)
        return d

    def reset(self) -> None:
        self.next = self.first


def status_of(msg: Any) -> tuple[str, str]:
    """(status code, description) of a status message JetStream sent to a pull's inbox
    (a message with no reply subject); ("", "") when it carries none."""
    headers = msg.headers or {}
    # nats-py keeps what follows the status line's description (the server's next
    # header lines) in it: the first line is the description
    description = str(headers.get("Description", "")).split("\n", 1)[0].strip()
    return str(headers.get("Status", "")).strip(), description


def normal_end(status: str, description: str) -> bool:
    """A pull that ended with nothing in the normal way: its `expires` passed (408), or
    no messages (404 "No Messages"). Anything else (503 no responders: no consumer, or
    no stream; 409 consumer deleted; another 404) says something is wrong."""
    if status == TIMED_OUT:
        return True
    return status == NO_MESSAGES and description.lower().startswith("no messages")


def consumer_gone(status: str, description: str) -> bool:
    """The statuses that mean the durable consumer (or its stream) is not there."""
    if status == "503":
        return True
    if status == NO_MESSAGES and not normal_end(status, description):
        return True
    return status == "409" and "deleted" in description.lower()


class ConnectionLog:
    """nats-py's connection callbacks: one log line per change of state (disconnected,
    reconnected, closed for good), never a traceback per reconnect attempt (nats-py's
    default error callback logs one every `reconnect_wait_secs` through an outage).
    `up` is set while connected; `closing` is set before a deliberate close."""

    def __init__(self, what: str, servers: list[str], attempts: int | None, wait: float):
        self.what, self.servers = what, servers
        self.attempts, self.wait = attempts, wait
        self.down_since: float | None = None
        self.failed_attempts = 0
        self.last_error = ""
        self.closing = False
        self.up = asyncio.Event()
        self.up.set()

    def options(self) -> dict[str, Any]:
        """nats.connect's keyword arguments for these callbacks and reconnect options."""
        return {
            "connect_timeout": CONNECT_TIMEOUT,
            "allow_reconnect": self.attempts != 0,
            "max_reconnect_attempts": -1 if self.attempts is None else self.attempts,
            "reconnect_time_wait": self.wait,
            "error_cb": self.error,
            "disconnected_cb": self.disconnected,
            "reconnected_cb": self.reconnected,
            "closed_cb": self.closed,
        }

    def window(self) -> str:
        if self.attempts is None:
            return "for as long as the topology runs"
        if self.attempts == 0:
            return "never (reconnect_attempts=0)"
        return f"{self.attempts} attempts {self.wait:g} s apart (reconnect_attempts)"

    async def error(self, e: Exception) -> None:
        text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        if self.down_since is not None:  # a failed reconnect attempt: counted, not logged
            self.failed_attempts += 1
            self.last_error = text
            log.debug("%s: NATS reconnect attempt failed: %s", self.what, text)
            return
        if text != self.last_error:  # the same error again and again: said once
            log.warning("%s: NATS error: %s", self.what, text)
        self.last_error = text

    async def disconnected(self) -> None:
        self.up.clear()
        if self.closing or self.down_since is not None:
            return
        self.down_since = time.monotonic()
        self.failed_attempts = 0
        log.warning(
            "%s: disconnected from NATS %s; reconnecting %s",
            self.what,
            self.servers,
            self.window(),
        )

    async def reconnected(self) -> None:
        since, self.down_since = self.down_since, None
        self.last_error = ""
        self.up.set()
        took = time.monotonic() - since if since is not None else 0.0
        log.warning(
            "%s: reconnected to NATS %s after %.1f s (%d failed attempts)",
            self.what,
            self.servers,
            took,
            self.failed_attempts,
        )

    async def closed(self) -> None:
        self.up.set()  # nothing waits for a connection that will not come back
        if not self.closing:
            log.error(
                "%s: NATS connection to %s closed: no reconnect within %s (last error: %s)",
                self.what,
                self.servers,
                self.window(),
                self.last_error or "-",
            )

    def closed_error(self) -> ConnectionError:
        return ConnectionError(
            f"{self.what}: the NATS connection to {self.servers} is closed: the server did "
            f"not come back within {self.window()} (last error: {self.last_error or '-'})"
        )


async def connect(conn: ConnectionLog) -> Any:
    """A nats-py client for `conn`'s servers, with its callbacks and reconnect options."""
    nats = import_nats()
    return await nats.connect(conn.servers, **conn.options())


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
        self.paused = False
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
        s = self.spout
        self._space = asyncio.Event()
        self.conn = ConnectionLog(
            f"JetStreamSpout {s.stream}/{s.durable}",
            server_list(s.servers),
            getattr(s, "reconnect_attempts", None),
            getattr(s, "reconnect_wait_secs", 2.0),
        )
        self.nc = await connect(self.conn)
        try:
            await self._bind(nats)
        except BaseException:
            self.conn.closing = True
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
        self.consumer_config = config
        await self.js.add_consumer(s.stream, config)
        # JetStream's pull protocol by hand: a request for `want` messages to the
        # consumer's MSG.NEXT subject, the messages (then a status, if it ends early) to
        # an inbox this subscription's callback reads. nats-py's fetch() waits on each
        # message with a task and a timer of its own: measured, most of the loop's time.
        self.next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{s.stream}.{s.durable}"
        self.reply = self.nc.new_inbox()
        self._left = self.received = 0
        self.pulls = 0  # pull requests sent (statistics, tests)
        self._status = ("", "")
        self._request_done = asyncio.Event()
        self.sub = await self.nc.subscribe(self.reply, cb=self._on_msg)

    async def _on_msg(self, msg: Any) -> None:
        if not msg.reply:  # a status (404 none, 408 expired, 409, 503 ...): the request ended
            self._status = status_of(msg)
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
        try:
            await self._fetching()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - handed to the spout's thread
            if self.nc.is_closed and not self.conn.closing:
                self.error = self.conn.closed_error()
                self.error.__cause__ = e
            else:
                self.error = e

    async def _fetching(self) -> None:
        window, expires = self.window, int(FETCH_TIMEOUT * 1e9)
        backoff = Backoff()
        odd_status = ""  # the unexpected status last warned about (once, not per pull)
        quick = 0  # pulls in a row that ended empty long before their `expires`
        while True:
            if self.paused:  # deactivated: no pulls; what the inbox holds is kept alive
                await self._hold()
                continue
            want = window.want()
            if want == 0:
                self._space.clear()
                await self._space.wait()
                continue
            if not self.nc.is_connected:  # an outage: nothing to ask until it ends
                if self.nc.is_closed:
                    raise self.conn.closed_error()
                await _wait(self.conn.up, FETCH_TIMEOUT * 4)
                continue
            before = self.received
            self._left = want
            self._status = ("", "")
            self._request_done.clear()
            request = json.dumps({"batch": want, "expires": expires}).encode()
            sent = time.monotonic()
            self.pulls += 1
            await self.nc.publish(self.next_subject, request, reply=self.reply)
            try:
                await asyncio.wait_for(self._request_done.wait(), FETCH_TIMEOUT * 4)
            except TimeoutError:
                pass  # the status was lost (a reconnect): ask again
            if self.received != before:
                backoff.reset()
                odd_status, quick = "", 0
                continue
            status, description = self._status
            if consumer_gone(status, description):
                await self._rebind(status, description)
                backoff.reset()
                continue
            if status and not normal_end(status, description):
                if status != odd_status:
                    odd_status = status
                    # 409 "Exceeded MaxWaiting / MaxAckPending ...": busy, not broken
                    say = log.debug if status == "409" else log.warning
                    say(
                        "JetStreamSpout: a pull from consumer %r of stream %r ended with "
                        "status %s %r; retrying with a backoff",
                        self.spout.durable,
                        self.spout.stream,
                        status,
                        description,
                    )
                await asyncio.sleep(backoff.delay())
                continue
            if time.monotonic() - sent < FETCH_TIMEOUT / 2:
                # an empty end long before `expires`, whatever its status: never a
                # request sent at once again and again
                quick += 1
                if quick > 1:
                    await asyncio.sleep(backoff.delay())
            else:
                quick = 0
                backoff.reset()
            if self.spout.stop_at_end and not self._ended:
                try:
                    await self._check_end()  # a request that brought nothing
                except Exception as e:  # noqa: BLE001 - an outage: looked at again next time
                    log.debug("JetStreamSpout: the end check failed: %r", e)

    async def _hold(self) -> None:
        """While the spout is deactivated (next_tuple not called), tell JetStream the
        messages waiting in the inbox are in progress every half ack_wait, so none is
        redelivered (pulled again beside itself, and emitted twice on activate)."""
        if self.nc.is_connected:
            for msg in list(self.inbox):
                try:
                    await self.nc.publish(msg.reply, PROGRESS.encode())
                except Exception as e:  # noqa: BLE001 - it is redelivered after ack_wait
                    log.debug("JetStream +WPI for %s failed: %s", msg.reply, e)
        self._space.clear()
        await _wait(self._space, self.spout.ack_wait_secs / 2)

    async def _rebind(self, status: str, description: str) -> None:
        """The durable consumer is not there (503 no responders, or 409 consumer deleted):
        its stream was deleted, or the consumer was. Waits with a backoff for the stream
        (failing with an error naming it past `missing_stream_timeout_secs`), lets what
        the old consumer delivered settle, then creates the consumer again as the spout's
        options say. One warning for the whole episode, not one per pull."""
        nats = import_nats()
        not_found = nats.js.errors.NotFoundError
        s = self.spout
        limit = getattr(s, "missing_stream_timeout_secs", None)
        backoff = Backoff()
        where = f"{s.stream!r} at {server_list(s.servers)}"
        gone_since: float | None = None
        warned = False
        while True:
            stream_info: Any = None
            try:
                stream_info = await self.js.stream_info(s.stream)
                await self.js.consumer_info(s.stream, s.durable)
                return  # both there: the status was passing (a restart, a leader change)
            except not_found:
                pass
            except Exception as e:  # noqa: BLE001 - an outage, JetStream not ready: again
                log.debug("JetStreamSpout: checking stream %s: %r", where, e)
                await asyncio.sleep(backoff.delay())
                continue
            now = time.monotonic()
            if stream_info is None:  # the stream is gone
                if gone_since is None:
                    gone_since = now
                    log.warning(
                        "JetStreamSpout: stream %s is gone (pull status %s %r for consumer "
                        "%r); waiting for it to come back%s",
                        where,
                        status,
                        description,
                        s.durable,
                        f" for up to {limit:g} s (missing_stream_timeout_secs)"
                        if limit is not None
                        else "",
                    )
                elif limit is not None and now - gone_since >= limit:
                    raise LookupError(
                        f"JetStreamSpout: stream {where} was deleted and has not come back "
                        f"within {limit:g} s (missing_stream_timeout_secs); consumer "
                        f"{s.durable!r}"
                    )
                await asyncio.sleep(backoff.delay())
                continue
            # the stream is there, the consumer is not: what the old one delivered is
            # settled first (its acks cannot reach the new one, and a new delivery must
            # not meet a tree of an old one with the same sequence), for at most ack_wait
            if not warned and gone_since is None:  # the stream's warning said it all
                warned = True
                log.warning(
                    "JetStreamSpout: consumer %r of stream %s is gone (pull status %s %r); "
                    "creating it again",
                    s.durable,
                    where,
                    status,
                    description,
                )
            settle_by = now + s.ack_wait_secs
            while self.window.outstanding and time.monotonic() < settle_by:
                await asyncio.sleep(backoff.delay())
            try:
                await self.js.add_consumer(s.stream, self.consumer_config)
            except Exception as e:  # noqa: BLE001 - deleted again, an outage: look again
                log.debug("JetStreamSpout: creating consumer %r again: %r", s.durable, e)
                await asyncio.sleep(backoff.delay())
                continue
            if gone_since is not None:  # a new stream: its end, for stop_at_end
                self.end_seq = stream_info.state.last_seq
            log.info(
                "JetStreamSpout: consumer %r of stream %s created again%s; reading on",
                s.durable,
                where,
                f" after the stream was gone {now - gone_since:.1f} s"
                if gone_since is not None
                else "",
            )
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

    def pause(self, paused: bool) -> None:
        """The spout was deactivated (True) or activated (False): pulls stop or go on."""
        self.paused = paused
        self.loop.call(self._space.set)

    def delivery(self, msg: Any) -> tuple[int, tuple]:
        """JetStream's delivery count of `msg` (1 on its first) and its row, for a dead
        letter."""
        parts = msg.reply.split(".")
        n = int(parts[4]) if len(parts) == 9 else msg.metadata.num_delivered
        return n, (msg.subject, msg.data, msg.headers, _stream_seq(msg))

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
        self.conn.closing = True
        if self.nc.is_connected:
            await self.nc.flush()
        await self.nc.close()


async def _wait(event: asyncio.Event, timeout: float) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        pass


def _stream_seq(msg: Any) -> int:
    """The stream sequence from the ack subject `$JS.ACK.<stream>.<consumer>.<delivered>.
    <sseq>...` without building nats-py's Metadata (a dataclass per message)."""
    parts = msg.reply.split(".")
    if len(parts) == 9:
        return int(parts[5])
    return msg.metadata.sequence.stream
