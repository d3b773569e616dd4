"""Without keys every socket binds to loopback only."""

from __future__ import annotations

import pytest

from stormish import ConfigError
from stormish.transport.security import LOOPBACK, host_of, is_loopback


@pytest.mark.parametrize(
    "address, host",
    [
        ("tcp://127.0.0.1:5555", "127.0.0.1"),
        ("tcp://[::1]:80", "::1"),
        ("tcp://example.org:1", "example.org"),
        ("127.0.0.2", "127.0.0.2"),
        ("::1", "::1"),
    ],
)
def test_host_of(address, host):
    assert host_of(address) == host


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.2.1", "::1", "localhost"])
def test_loopback_hosts_are_allowed(host):
    assert is_loopback(host)
    LOOPBACK.check_bind(host)


@pytest.mark.parametrize("address", ["tcp://0.0.0.0:1", "tcp://10.0.0.5:1", "tcp://*:1", "a.b"])
def test_other_addresses_are_refused_with_the_reason(address):
    with pytest.raises(ConfigError, match="loopback addresses only"):
        LOOPBACK.check_bind(address)


def test_ipc_is_local_by_nature():
    LOOPBACK.check_bind("ipc:///tmp/x")
