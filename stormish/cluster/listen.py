"""Where a supervisor listens: on the address its `--host` names, not on every interface.

`--host` is the name other hosts reach this host's workers by; the workers' links and the
supervisor's metrics listen on that address only (a keyed supervisor once listened on
0.0.0.0 whatever its `--host`, so a host with a private and a public interface exposed
its worker ports on both). ZeroMQ binds addresses and interface names, not host names, so
a name is resolved here, once, at start-up.
"""

from __future__ import annotations

import ipaddress
import socket

from ..errors import ConfigError


def listen_address(host: str) -> str:
    """The IPv4 address `host` names: an address as given, a name resolved (the worker
    links' `tcp://host:port` addresses are IPv4)."""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError as exc:
        raise ConfigError(f"--host {host!r}: no IPv4 address to listen on ({exc})") from None
    return str(infos[0][4][0])
