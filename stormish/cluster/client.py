"""Talking to a nimbus from the command line (or a program): one request, one reply."""

from __future__ import annotations

import itertools
import time
from typing import Any

import zmq

from ..errors import StormishError
from ..transport import control as ct
from .api import API_VERBS

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


class NimbusClient:
    def __init__(self, spec: str, security: Any, timeout: float = 30.0):
        self.address = nimbus_address(spec)
        self.timeout = timeout
        self.security = security
        self.keyed = getattr(security, "public", None) is not None
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        security.client(self.sock)
        self.sock.connect(self.address)
        self._ids = itertools.count(1)

    def call(self, verb: str, payload: Any = None, timeout: float | None = None) -> Any:
        if verb == "submit":  # the checks a local run makes, before pickling it to nimbus
            topology, conf = payload[0], payload[1]
            topology.validate(conf)
        req_id = next(self._ids)
        self.sock.send_multipart(ct.request(verb, req_id, payload, API_VERBS))
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sock.poll(int(left * 1000) + 1):
                raise NoAnswer(
                    f"nimbus at {self.address} did not answer {verb} within "
                    f"{timeout or self.timeout:g}s (is it running, with the same keys?)"
                )
            ok, rid, value = ct.decode_reply(self.sock.recv_multipart())
            if rid != req_id:
                continue  # a late reply to a request we gave up on
            if not ok:
                raise StormishError(f"nimbus refused {verb}: {value}")
            return value

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
                f"{'try' if tries == 1 else 'tries'}, "
                f"{'with CURVE keys' if self.keyed else 'without keys'}): is it "
                "running there, with the same keys? (--connect-timeout to wait longer)"
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
