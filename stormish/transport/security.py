"""Who may talk to a socket that can carry a pickle.

Every socket stormish binds or connects (worker links, the control channel between a
worker and whoever started it) goes through a `Security` object before it is used, so
that authentication is one object to swap, not a change at each socket. The only policy
built so far is `Loopback`: no keys, so a socket may only be bound on a loopback address
(DESIGN section 6: without keys, bind to loopback only and refuse another address with a
clear error). `Curve` is the policy with keys (`stormish keys DIR`): every socket
is encrypted with ZeroMQ CURVE, and a ZAP handler on each context that binds lets in only
peers that prove they hold a key of the cluster, during the handshake, so an
unauthenticated peer never reaches a decoder.

Keys: one cluster key pair (`cluster.key`, `cluster.key_secret`) that every daemon and
worker of a cluster is given; any further `*.key` public key in the directory is also
let in (a client machine with a key of its own).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
from typing import Any

from ..errors import ConfigError


def host_of(address: str) -> str:
    """'tcp://127.0.0.1:5555' -> '127.0.0.1'; a bare host is returned as it is."""
    if "://" not in address:
        return address
    rest = address.split("://", 1)[1]
    if rest.startswith("["):
        return rest[1 : rest.index("]")]
    return rest.rsplit(":", 1)[0] if ":" in rest else rest


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Loopback:
    """No keys: loopback addresses only."""

    name = "loopback"

    def check_bind(self, address: str) -> None:
        if address.startswith("ipc://") or address.startswith("inproc://"):
            return
        host = host_of(address)
        if not is_loopback(host):
            raise ConfigError(
                f"refusing to bind {address!r}: without CURVE keys stormish binds to "
                "loopback addresses only (127.0.0.1); give keys to listen on "
                f"{host!r}"
            )

    def server(self, sock: Any) -> None:
        """Prepare a socket that binds (nothing to do without keys)."""

    def client(self, sock: Any) -> None:
        """Prepare a socket that connects (nothing to do without keys)."""

    def release(self, ctx: Any) -> None:
        """Nothing runs per context without keys."""


LOOPBACK = Loopback()


class Curve:
    """CURVE encryption and authentication with the cluster's keys."""

    name = "curve"

    def __init__(self, keys_dir: str):
        from ..cluster.keys import load

        self.keys_dir = os.path.abspath(keys_dir)
        self.public, self.secret = load(self.keys_dir)
        self._auth: dict[int, Any] = {}
        self._lock = threading.Lock()

    def check_bind(self, address: str) -> None:
        """Any address: peers must hold a cluster key."""

    def server(self, sock: Any) -> None:
        self._authenticator(sock.context)
        sock.curve_secretkey = self.secret
        sock.curve_publickey = self.public
        sock.curve_server = True

    def client(self, sock: Any) -> None:
        sock.curve_secretkey = self.secret
        sock.curve_publickey = self.public
        sock.curve_serverkey = self.public

    def _authenticator(self, ctx: Any) -> None:
        from zmq.auth.thread import ThreadAuthenticator

        with self._lock:
            if id(ctx) in self._auth:
                return
            auth = ThreadAuthenticator(ctx, log=logging.getLogger("stormish.zap"))
            auth.start()
            auth.configure_curve(domain="*", location=self.keys_dir)
            self._auth[id(ctx)] = auth

    def release(self, ctx: Any) -> None:
        """Stop the context's ZAP handler (before `ctx.term()`, which waits for it)."""
        with self._lock:
            auth = self._auth.pop(id(ctx), None)
        if auth is not None:
            auth.stop()


def security_for(keys_dir: str | None) -> Loopback | Curve:
    """The policy for a process: CURVE when it was given a keys directory (an option
    or STORMISH_KEYS), loopback only otherwise."""
    keys_dir = keys_dir or os.environ.get("STORMISH_KEYS") or None
    return Curve(keys_dir) if keys_dir else LOOPBACK
