"""Talking to a nimbus from the command line (or a program): one request, one reply."""

from __future__ import annotations

import itertools
import time
from typing import Any

import zmq

from ..errors import StormishError
from ..runtime import control as ct
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


class NimbusClient:
    def __init__(self, spec: str, security: Any, timeout: float = 30.0):
        self.address = nimbus_address(spec)
        self.timeout = timeout
        self.security = security
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        security.client(self.sock)
        self.sock.connect(self.address)
        self._ids = itertools.count(1)

    def call(self, verb: str, payload: Any = None, timeout: float | None = None) -> Any:
        req_id = next(self._ids)
        self.sock.send_multipart(ct.request(verb, req_id, payload, API_VERBS))
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sock.poll(int(left * 1000) + 1):
                raise StormishError(
                    f"nimbus at {self.address} did not answer {verb} within "
                    f"{timeout or self.timeout:g}s (is it running, with the same keys?)"
                )
            ok, rid, value = ct.decode_reply(self.sock.recv_multipart())
            if rid != req_id:
                continue  # a late reply to a request we gave up on
            if not ok:
                raise StormishError(f"nimbus refused {verb}: {value}")
            return value

    def close(self) -> None:
        self.sock.close(0)
        self.security.release(self.ctx)
        self.ctx.term()

    def __enter__(self) -> NimbusClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
