"""Who may talk to a socket that can carry a pickle.

Every socket stormish binds or connects (worker links, the control channel between a
worker and whoever started it) goes through a `Security` object before it is used, so
that authentication is one object to swap, not a change at each socket. The only policy
built so far is `Loopback`: no keys, so a socket may only be bound on a loopback address
(DESIGN section 6: without keys, bind to loopback only and refuse another address with a
clear error). The CURVE policy (keys from `stormish keys`, a ZAP handler that checks the
peer's public key before any frame reaches a decoder) plugs in here with the daemons.
"""

from __future__ import annotations

import ipaddress
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


LOOPBACK = Loopback()
