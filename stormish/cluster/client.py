"""Talking to a nimbus from the command line (or a program): one request, one reply."""

from __future__ import annotations

import itertools
import time
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


class NoAnswer(StormishError):
    pass


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
    def __init__(self, spec: str, security: Security, timeout: float = 30.0):
        self.address = nimbus_address(spec)
        self.timeout = timeout
        self.security = security
        self.keyed = getattr(security, "public", None) is not None
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        # queue a request only on a connection whose handshake completed, so a refused
        # handshake (a keyed nimbus, a client without its keys) is told apart
        self.sock.setsockopt(zmq.IMMEDIATE, 1)
        security.client(self.sock)
        self.sock.connect(self.address)
        self._ids = itertools.count(1)

    def call(self, verb: str, payload: Any = None, timeout: float | None = None) -> Any:
        payload = message(verb, payload)
        if isinstance(payload, Submit):  # the checks a local run makes, before pickling it
            payload.topology.validate(payload.conf)
        req_id = next(self._ids)
        frames = ct.request(verb, req_id, payload, API_VERBS)
        within = timeout or self.timeout
        deadline = time.monotonic() + within
        # a DEALER with no connection (nimbus down, or its handshake refused our keys)
        # blocks a send for ever: wait for room under the same deadline as the answer
        while not self.sock.poll(self._left_ms(deadline), zmq.POLLOUT):
            if time.monotonic() >= deadline:
                raise NoAnswer(self._silent(verb, within, "completed no handshake"))
        self.sock.send_multipart(frames, zmq.NOBLOCK)
        while True:
            if not self.sock.poll(self._left_ms(deadline)):
                if time.monotonic() >= deadline:
                    raise NoAnswer(self._silent(verb, within, "did not answer"))
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
        the tries it took."""
        from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

        start = time.monotonic()
        tries = 0
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
                    self.call("list", timeout=max(0.05, min(left, 0.25 * 2**tries)))
        except NoAnswer:
            raise NoAnswer(
                f"no answer from a nimbus at {self.address} within {within:g}s ({tries} "
                f"{'try' if tries == 1 else 'tries'}): is it running there? "
                f"{keys_hint(self.keyed)} (--connect-timeout to wait longer)"
            ) from None
        return tries

    def close(self) -> None:
        self.sock.close(0)
        self.security.release(self.ctx)
        self.ctx.term()

    def __enter__(self) -> NimbusClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
