"""Talking to a nimbus from the command line (or a program): one request, one reply."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import zmq

from ..errors import StormishError
from ..runtime import error_report, stats  # noqa: F401 - the records nimbus's answers carry
from ..transport import control as ct
from ..transport.security import Security
from .api import API_VERBS, Submit, message

DEFAULT_PORT = 6627


def nimbus_address(spec: str) -> str:
    """'host', 'host:port' or 'tcp://host:port' -> 'tcp://host:port'."""
    if "://" in spec:
        return spec
    host, _, port = spec.partition(":")
    if not host:
        raise StormishError(f"nimbus address {spec!r} names no host (host or host:port)")
    if port and not port.isdigit():
        raise StormishError(f"nimbus address {spec!r}: port {port!r} is not a number")
    return f"tcp://{host}:{port or DEFAULT_PORT}"


CONNECT_TIMEOUT = 2.0  # how long a command waits for a nimbus that does not answer


# what a client may ask again of the next nimbus (`--nimbus a,b`) when one does not
# answer: reads. A write goes to the next one only when it surely never left this client
RETRY_SAFE = frozenset({"list", "supervisors", "stats", "leader", "graph"})


class NoAnswer(StormishError):
    """No answer from a nimbus. `sent`: the request left this client (the nimbus may
    have received it); `handshake`: a connection's handshake completed (the keys are
    right: a keys hint would mislead)."""

    def __init__(self, message: str, sent: bool = False, handshake: bool = False):
        super().__init__(message)
        self.sent = sent
        self.handshake = handshake


def keys_hint(keyed: bool) -> str:
    """What to check when a nimbus stays silent: a keyed nimbus (the default) drops a
    client without its keys during the handshake, and nothing comes back to say so."""
    if keyed:
        return (
            "This client used CURVE keys (--keys or STORMISH_KEYS): they must be the "
            "nimbus's (its data directory's keys/, or the --keys it was given)."
        )
    return (
        "This client has no keys, and a nimbus is keyed unless started with --insecure: "
        "give the cluster's keys directory with --keys DIR or STORMISH_KEYS (nimbus makes "
        "it as DATA/keys on its first start)."
    )


class NimbusClient:
    """One nimbus's client; `others`: the nimbus to turn to, in order, when this one
    stops answering (`--nimbus a,b,c`): a read is asked again there, a write only when
    it never left this client (`RETRY_SAFE`). `tell` hears of each such turn."""

    def __init__(
        self,
        spec: str,
        security: Security,
        timeout: float = 30.0,
        others: list[str] | tuple[str, ...] = (),
        connect_timeout: float = CONNECT_TIMEOUT,
        tell: Callable[[str], None] | None = None,
    ):
        self.address = nimbus_address(spec)
        self.timeout = timeout
        self.security = security
        self.keyed = getattr(security, "public", None) is not None
        self.others = list(others)
        self.connect_timeout = connect_timeout
        self.tell = tell
        self.ctx = zmq.Context()
        self._ids = itertools.count(1)
        self._open()

    def _open(self) -> None:
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.MAXMSGSIZE, ct.MAX_FRAME)  # what took nimbus's port: control.py
        # queue a request only on a connection whose handshake completed, so a refused
        # handshake (a keyed nimbus, a client without its keys) is told apart
        self.sock.setsockopt(zmq.IMMEDIATE, 1)
        self.security.client(self.sock)
        # a connection that closes while a request waits (the nimbus died) is told at
        # once, not after the whole timeout
        self.monitor = self.sock.get_monitor_socket(
            zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED
        )
        self.sock.connect(self.address)
        self._handshakes = 0

    def _shut(self) -> None:
        self.sock.disable_monitor()
        self.monitor.close(0)
        self.sock.close(0)  # LINGER 0: nothing queued here is delivered later

    def call(
        self,
        verb: str,
        payload: Any = None,
        timeout: float | None = None,
        connect_within: float | None = None,
    ) -> Any:
        """The answer to one request; on no answer, the next nimbus of `others` when the
        request is safe to ask again there (see the class). With others to turn to, a
        nimbus that completes no handshake within `connect_timeout` makes way (it
        answered the probe, so it stopped since)."""
        if connect_within is None and self.others:
            connect_within = self.connect_timeout
        while True:
            try:
                return self._call(verb, payload, timeout, connect_within)
            except NoAnswer as exc:
                if not self.others:
                    raise
                nxt = nimbus_address(self.others[0])
                if exc.sent and verb not in RETRY_SAFE:
                    raise NoAnswer(
                        f"{exc}; not asked of {nxt}: {self.address} may have received the "
                        f"{verb} before it went away, and may have carried it out (or its "
                        f"successor may): `stormish list --nimbus {self.others[0]}` shows "
                        "whether it did",
                        sent=True,
                        handshake=exc.handshake,
                    ) from None
                if self.tell is not None:
                    self.tell(f"nimbus {self.address}: {exc}; trying {nxt}")
                self.others.pop(0)
                self._shut()
                self.address = nxt
                self._open()
                connect_within = self.connect_timeout  # a silent one makes way quickly

    def _call(
        self, verb: str, payload: Any, timeout: float | None, connect_within: float | None
    ) -> Any:
        payload = message(verb, payload)
        if isinstance(payload, Submit):  # the checks a local run makes, before pickling it
            payload.topology.validate(payload.conf)
        req_id = next(self._ids)
        frames = ct.request(verb, req_id, payload, API_VERBS)
        within = timeout or self.timeout
        deadline = time.monotonic() + within
        reach = min(deadline, time.monotonic() + (connect_within or within))
        # a DEALER with no connection (nimbus down, or its handshake refused our keys)
        # blocks a send for ever: wait for room under the same deadline as the answer
        while not self.sock.poll(self._left_ms(reach), zmq.POLLOUT):
            if time.monotonic() >= reach:
                self._events()
                raise NoAnswer(
                    self._silent(verb, reach - deadline + within, "completed no handshake"),
                    handshake=self._handshakes > 0,
                )
        self._events()  # what happened to earlier connections is no news of this one
        self.sock.send_multipart(frames, zmq.NOBLOCK)
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        poller.register(self.monitor, zmq.POLLIN)
        while True:
            ready = dict(poller.poll(self._left_ms(deadline)))
            if self.monitor in ready and self._events():
                raise NoAnswer(
                    f"nimbus at {self.address} closed the connection before answering "
                    f"({verb}): it stopped or died",
                    sent=True,
                    handshake=True,
                )
            if self.sock not in ready:
                if time.monotonic() >= deadline:
                    raise NoAnswer(
                        f"nimbus at {self.address} did not answer ({verb}) within "
                        f"{within:g}s: it took the request (its handshake completed: the "
                        "keys are right) but may be busy, or have died meanwhile",
                        sent=True,
                        handshake=True,
                    )
                continue
            try:
                ok, rid, value = ct.decode_reply(self.sock.recv_multipart())
            except ct.ControlError as exc:
                raise StormishError(f"nimbus at {self.address}: unreadable answer: {exc}") from None
            if rid != req_id:
                continue  # a late reply to a request we gave up on
            if not ok:
                raise StormishError(f"nimbus refused {verb}: {value}")
            return value

    def _events(self) -> bool:
        """Read the monitor's events: True if a connection closed since."""
        from zmq.utils.monitor import recv_monitor_message

        closed = False
        while self.monitor.poll(0):
            event = recv_monitor_message(self.monitor)["event"]
            if event == zmq.EVENT_DISCONNECTED:
                closed = True
            elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._handshakes += 1
        return closed

    @staticmethod
    def _left_ms(deadline: float) -> int:
        return max(0, int((deadline - time.monotonic()) * 1000)) + 1

    def _silent(self, verb: str, within: float, what: str) -> str:
        return (
            f"nimbus at {self.address} {what} ({verb}) within {within:g}s: is it running "
            f"there? {keys_hint(self.keyed)}"
        )

    def probe(self, within: float = CONNECT_TIMEOUT) -> int:
        """Make sure a nimbus answers before the real request: a few cheap requests with
        backoff (tenacity), the whole within `within` seconds; a nimbus that is not there
        (ZeroMQ would wait for it for ever) fails fast, saying what was tried. Returns
        the tries it took. The request is `leader`, which nimbus answers from memory:
        one whose ZooKeeper is away answers it at once (and says so to the real request)."""
        from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

        start = time.monotonic()
        tries = 0
        shook = False
        try:
            for attempt in Retrying(
                stop=stop_after_delay(within),
                wait=wait_exponential(multiplier=0.05, max=0.5),
                retry=retry_if_exception_type(NoAnswer),
                reraise=True,
            ):
                with attempt:
                    tries += 1
                    left = within - (time.monotonic() - start)
                    try:
                        self._call("leader", None, max(0.05, min(left, 0.25 * 2**tries)), None)
                    except NoAnswer as exc:
                        shook = shook or exc.handshake
                        raise
        except NoAnswer:
            tried = f"{tries} {'try' if tries == 1 else 'tries'}"
            if shook:  # it let us in (CURVE): the keys are right; it is slow, or stopping
                raise NoAnswer(
                    f"a nimbus at {self.address} completed the handshake (the keys are "
                    f"right) but did not answer within {within:g}s ({tried}): it may be "
                    "busy, or stopping (--connect-timeout to wait longer)",
                    handshake=True,
                ) from None
            raise NoAnswer(
                f"no answer from a nimbus at {self.address} within {within:g}s ({tried}): "
                f"is it running there? {keys_hint(self.keyed)} (--connect-timeout to wait "
                "longer)"
            ) from None
        return tries

    def close(self) -> None:
        self._shut()
        self.security.release(self.ctx)
        self.ctx.term()

    def __enter__(self) -> NimbusClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
