"""A context's ZAP handler (ZeroMQ RFC 27): who may complete a CURVE handshake.

pyzmq's `ThreadAuthenticator` does this job with an asyncio event loop on its thread;
importing asyncio for it cost every process that serves a socket (each worker, the
local run's parent, nimbus, a supervisor) ~28 ms of start-up, on the critical path of
`stormish run -w N`. This is the same protocol on a plain thread and a `zmq.Poller`:
one REP socket at `inproc://zeromq.zap.01`, one reply per request, and an inproc pair
to stop it. What it answers, as pyzmq's authenticator configured with a CURVE callback
for every domain and no address rules: CURVE lets in the keys `allowed` holds, NULL is
let in (no socket of ours uses it), anything else and any malformed request is refused.
PLAIN is let in only on a socket whose ZAP domain was given a password (`passwords`:
the bulk socket, transport/bulk.py), with that password; every other PLAIN is refused.
"""

from __future__ import annotations

import hmac
import itertools
import logging
import threading
from collections.abc import Callable
from typing import Any

import zmq
from zmq.utils import z85

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
VERSION = b"1.0"

_log = logging.getLogger("stormish.zap")


class ZapHandler(threading.Thread):
    """Answers the ZAP requests of one context until `stop`.

    `allowed(z85_key) -> bool` decides a CURVE client; a connection let in gets the
    User-Id `"<n> <z85 key>"`, n counting the handshakes, so every message received on
    it says which connection it came on (`Frame.get("User-Id")`).

    `passwords` (ZAP domain -> password) lets in a PLAIN client that gives the password
    of the domain of the socket it connects to (`security.Curve.password_server`); a
    domain not in it lets in no PLAIN client. Set from any thread: the handler's thread
    reads one entry a request."""

    def __init__(self, ctx: zmq.Context, allowed: Callable[[bytes], bool]):
        super().__init__(name="stormish-zap", daemon=True)
        self.allowed = allowed
        self.passwords: dict[bytes, bytes] = {}
        self._handshakes = itertools.count(1)
        # created and bound here, used only by the thread from `start` on (pyzmq's
        # authenticator hands its socket over the same way)
        self._zap = ctx.socket(zmq.REP)
        self._zap.linger = 0
        self._zap.bind(ZAP_ENDPOINT)
        endpoint = f"inproc://stormish-zap-stop-{id(self)}"
        self._stop_in = ctx.socket(zmq.PAIR)
        self._stop_in.linger = 0
        self._stop_in.bind(endpoint)
        self._stop_out = ctx.socket(zmq.PAIR)
        self._stop_out.linger = 0
        self._stop_out.connect(endpoint)

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._stop_in, zmq.POLLIN)
        poller.register(self._zap, zmq.POLLIN)
        try:
            while True:
                events = dict(poller.poll())
                if self._stop_in in events:
                    return
                if self._zap in events:
                    request = self._zap.recv_multipart()
                    self._zap.send_multipart(self.answer(request))
        finally:
            self._zap.close()
            self._stop_in.close()

    def answer(self, msg: list[bytes]) -> list[bytes]:
        """The reply to one request (pure: tested on its own)."""
        if len(msg) < 6:
            _log.warning("ZAP request of %d frames refused", len(msg))
            request_id = msg[1] if len(msg) > 1 else b""
            return _reply(request_id, b"400", b"Not enough frames")
        version, request_id, domain, address, _identity, mechanism = msg[:6]
        if version != VERSION:
            return _reply(request_id, b"400", b"Invalid version")
        if mechanism == b"NULL":
            return _reply(request_id, b"200", b"OK", b"anonymous")
        if mechanism == b"PLAIN":
            return self._plain(request_id, domain, address, msg[6:])
        if mechanism != b"CURVE":
            _log.debug("DENIED %r from %r", mechanism, address)
            return _reply(request_id, b"400", b"Unsupported mechanism")
        credentials = msg[6:]
        if len(credentials) != 1 or len(credentials[0]) != 32:
            return _reply(request_id, b"400", b"Invalid credentials")
        key = z85.encode(credentials[0])
        if not self.allowed(key):
            _log.debug("DENIED (CURVE) client_key=%r address=%r", key, address)
            return _reply(request_id, b"400", b"Unknown key")
        user = f"{next(self._handshakes)} {key.decode('ascii')}"
        _log.debug("ALLOWED (CURVE) %s address=%r", user, address)
        return _reply(request_id, b"200", b"OK", user.encode())

    def _plain(
        self, request_id: bytes, domain: bytes, address: bytes, credentials: list[bytes]
    ) -> list[bytes]:
        """PLAIN: the password of the socket's domain (compared in constant time)."""
        expected = self.passwords.get(domain)
        if expected is None:
            _log.debug("DENIED PLAIN on domain %r from %r", domain, address)
            return _reply(request_id, b"400", b"Unsupported mechanism")
        if len(credentials) != 2 or not hmac.compare_digest(credentials[1], expected):
            _log.debug("DENIED (PLAIN) domain=%r address=%r", domain, address)
            return _reply(request_id, b"400", b"Invalid password")
        user = f"{next(self._handshakes)} plain"
        return _reply(request_id, b"200", b"OK", user.encode())

    def stop(self) -> None:
        """Stop answering and wait for the thread (before the context's `term`)."""
        try:
            if self.is_alive():
                try:  # never blocks: the pair is connected while the thread runs
                    self._stop_out.send(b"STOP", zmq.NOBLOCK)
                except zmq.Again:
                    pass
                self.join()
        finally:
            self._stop_out.close()
            if not self.is_alive():  # never started: its sockets are still ours
                for s in (self._zap, self._stop_in):
                    s.close()


def _reply(request_id: bytes, code: bytes, text: bytes, user: bytes = b"") -> list[bytes]:
    return [VERSION, request_id, code, text, user if code == b"200" else b"", b""]


def start(ctx: Any, allowed: Callable[[bytes], bool]) -> ZapHandler:
    handler = ZapHandler(ctx, allowed)
    handler.start()
    return handler
