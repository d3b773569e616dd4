"""Who may talk to a socket that can carry a pickle.

Every socket stormish binds or connects (worker links, the control channel between a
worker and whoever started it) goes through a `Security` object before it is used, so
that authentication is one object to swap, not a change at each socket. `Loopback` is
the policy without keys: a socket may only be bound on a loopback address
(docs/security.md). `Curve` is the policy with keys: every socket is encrypted with ZeroMQ
CURVE, and a ZAP handler on each context that binds lets in only peers that prove they
hold a key of the cluster, during the handshake, so an unauthenticated peer never
reaches a decoder.

Keys: on a cluster, one key pair (`cluster.key`, `cluster.key_secret`, from `stormish keys
DIR`) that every daemon and worker is given, checked private before it is used
(`keys.py`); the public keys of clients an operator authorised (`authorized_keys` in the
directory) are let in too, and nothing else: a `*.key` dropped in the directory is not.
A client with a key pair of its own (`stormish keys CLIENTDIR --client-of DIR`) connects
with it and the cluster's public key, and cannot serve. A local run of several
worker processes makes a key pair of its own (`Curve.ephemeral`) that lives in memory
and reaches each worker on its stdin (`--keys -`): never on a command line or in the
environment (both readable in /proc), never in a file.

The ZAP handler names each connection it lets in (`CONNECTION`, the messages' User-Id
property), so a receiver can tell which connection a message came on: a peer's
backpressure statuses count only on the connection it said HELLO on.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import os
import sys
import threading
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import zmq

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


class Security(Protocol):
    """How a socket is secured: `Loopback` (no keys) or `Curve` (the cluster's keys)."""

    name: str

    def check_bind(self, address: str) -> None:
        """Refuse an address this security may not listen on."""
        ...

    def server(self, sock: zmq.Socket) -> None:
        """Prepare a socket that binds."""
        ...

    def client(self, sock: zmq.Socket) -> None:
        """Prepare a socket that connects."""
        ...

    def password_server(self, sock: zmq.Socket, password: bytes) -> None:
        """Prepare a socket that binds without CURVE (the bulk socket): a peer completes
        the handshake (ZeroMQ's PLAIN) only if it gives `password`."""
        ...

    def release(self, ctx: zmq.Context) -> None:
        """Stop what runs per ZeroMQ context (a ZAP handler)."""
        ...


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

    def server(self, sock: zmq.Socket) -> None:
        """Prepare a socket that binds (nothing to do without keys)."""

    def client(self, sock: zmq.Socket) -> None:
        """Prepare a socket that connects (nothing to do without keys)."""

    def password_server(self, sock: zmq.Socket, password: bytes) -> None:
        """No ZAP handler runs without keys: nothing would check the password."""
        raise ConfigError("a socket with a password needs keys (a ZAP handler checks it)")

    def release(self, ctx: zmq.Context) -> None:
        """Nothing runs per context without keys."""


LOOPBACK = Loopback()


CONNECTION = "User-Id"  # the message property that names the connection (see _Zap)
# how long a peer of a keyed socket that binds may take to complete the handshake
# (ZMQ_HANDSHAKE_IVL; libzmq's default is 30 s): what a stranger's half-open handshake
# holds (up to a frame, the socket's ZMQ_MAXMSGSIZE) it holds for at most this long
HANDSHAKE_MS = 5000
_DOMAINS = itertools.count(1)  # the ZAP domains of sockets with a password
_KEYS_FORMAT = "stormish-curve-1"


def _zap(ctx: Any, allowed: _Allowed) -> Any:
    """Start a context's ZAP handler (`zap.ZapHandler`): it lets in the peers whose
    public key `allowed` holds and gives each connection it lets in a User-Id of its own,
    `"<n> <key>"` with n counting handshakes, so every message says which connection it
    came on."""
    from . import zap

    return zap.start(ctx, allowed.keys.__contains__)


class _Allowed:
    """The public keys let in (z85): `keys` (the cluster's own, or the one key of a local
    run) and, with a keys directory, the clients an operator authorised there
    (`authorized_keys`, read when a context's handler starts). Only those: a key file is
    not trusted for lying in the directory."""

    def __init__(self, keys_dir: str | None, keys: frozenset[bytes]):
        if keys_dir is not None:
            from .keys import authorized

            keys = keys | authorized(keys_dir)
        self.keys = keys


class Curve:
    """CURVE encryption and authentication with the cluster's keys, or with a key pair
    made for one local run (`ephemeral`)."""

    name = "curve"

    def __init__(self, keys_dir: str | None, pair: tuple[bytes, bytes] | None = None):
        """`keys_dir`: a cluster's keys (`stormish keys DIR`), or a client's (its own
        pair and the cluster's public key, `server_public`). Without it, `pair`: the
        (public, secret) z85 key pair of a local run, the only key let in."""
        if keys_dir is not None:
            from .keys import load_any

            self.keys_dir: str | None = os.path.abspath(keys_dir)
            self.public, self.secret, self.server_public = load_any(self.keys_dir)
        elif pair is not None:
            self.keys_dir = None
            self.public, self.secret = pair
            self.server_public = self.public
        else:
            raise ValueError("Curve needs a keys directory or a key pair")
        self._auth: dict[int, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def ephemeral(cls) -> Curve:
        """A key pair for one run, made in memory; give it to the run's workers with
        `export` (on their stdin), never on a command line or in a file."""
        import zmq

        return cls(None, zmq.curve_keypair())

    def export(self) -> bytes:
        """This policy's key pair as one line for a worker's stdin (`read`)."""
        if self.keys_dir is not None:
            raise ValueError("a cluster's keys are passed as a directory, not exported")
        pair = {
            "format": _KEYS_FORMAT,
            "public": self.public.decode(),
            "secret": self.secret.decode(),
        }
        return json.dumps(pair).encode() + b"\n"

    @classmethod
    def read(cls, stream: IO[bytes]) -> Curve:
        """The key pair a parent wrote with `export` (`--keys -`: on stdin)."""
        from ..errors import ConfigError

        line = stream.readline(4096)
        try:
            pair = json.loads(line)
            if pair["format"] != _KEYS_FORMAT:
                raise ValueError(f"format {pair['format']!r}")
            public, secret = pair["public"].encode(), pair["secret"].encode()
            if len(public) != 40 or len(secret) != 40:
                raise ValueError("z85 keys are 40 characters")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            what = "nothing" if not line else f"{len(line)} bytes"
            raise ConfigError(
                f"--keys -: expected a key pair line ({_KEYS_FORMAT}) on stdin, read {what}: {exc}"
            ) from None
        return cls(None, (public, secret))

    def check_bind(self, address: str) -> None:
        """Any address (peers must hold a cluster key), with the cluster's keys: a
        client's pair cannot serve. Said where a process starts (a supervisor given a
        client's directory joined nimbus, an authorised client, and every worker it
        started then failed, restarted for ever)."""
        if self.server_public != self.public:
            raise ConfigError(
                f"the keys in {self.keys_dir!r} are a client's (client.key_secret): a process "
                f"that listens ({address}) needs the cluster's keys (cluster.key_secret): "
                "give it a copy of nimbus's DATA/keys directory"
            )

    def server(self, sock: zmq.Socket) -> None:
        self.check_bind("a ZeroMQ socket")
        self._authenticator(sock.context)
        sock.handshake_ivl = HANDSHAKE_MS
        sock.curve_secretkey = self.secret
        sock.curve_publickey = self.public
        sock.curve_server = True

    def client(self, sock: zmq.Socket) -> None:
        sock.curve_secretkey = self.secret
        sock.curve_publickey = self.public
        sock.curve_serverkey = self.server_public

    def password_server(self, sock: zmq.Socket, password: bytes) -> None:
        """PLAIN with `password`, checked by the context's ZAP handler during the
        handshake, before libzmq takes a message frame of the peer's (a CURVE-less
        socket otherwise takes a message of endless frames from anyone). PLAIN sends the
        password in the clear: it gates who may reach the socket, it keeps nothing
        secret. Each such socket gets a ZAP domain of its own, and its password."""
        if not 0 < len(password) < 256:
            raise ValueError("a PLAIN password is 1 to 255 bytes")
        handler = self._authenticator(sock.context)
        domain = f"stormish-plain-{next(_DOMAINS)}".encode()
        handler.passwords[domain] = password
        sock.zap_domain = domain
        sock.handshake_ivl = HANDSHAKE_MS
        sock.plain_server = True

    def _authenticator(self, ctx: zmq.Context) -> Any:
        with self._lock:
            handler = self._auth.get(id(ctx))
            if handler is None:
                allowed = _Allowed(self.keys_dir, frozenset({self.public}))
                handler = self._auth[id(ctx)] = _zap(ctx, allowed)
            return handler

    def release(self, ctx: zmq.Context) -> None:
        """Stop the context's ZAP handler (before `ctx.term()`, which waits for it)."""
        with self._lock:
            auth = self._auth.pop(id(ctx), None)
        if auth is not None:
            auth.stop()


def security_for(keys_dir: str | None) -> Loopback | Curve:
    """The policy for a process: CURVE when it was given a keys directory (an option
    or STORMISH_KEYS) or `-` (a key pair on stdin, from the local run that started
    it), loopback only otherwise."""
    keys_dir = keys_dir or os.environ.get("STORMISH_KEYS") or None
    if keys_dir == "-":
        return Curve.read(sys.stdin.buffer)
    return Curve(keys_dir) if keys_dir else LOOPBACK
