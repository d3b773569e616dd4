"""Cluster keys on disk, the CURVE policy on real sockets, nimbus addresses, the store."""

from __future__ import annotations

import os
import stat

import pytest
import zmq

from stormish import ConfigError, StormishError
from stormish.cluster.client import nimbus_address
from stormish.cluster.store import Store
from stormish.transport.keys import create, load
from stormish.transport.security import LOOPBACK, Curve, Loopback, security_for


def test_keys_are_created_once_with_a_private_secret(tmp_path):
    public, secret = create(str(tmp_path / "k"))
    assert os.path.isfile(public)
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    with pytest.raises(ConfigError, match="keys already exist"):
        create(str(tmp_path / "k"))
    pub, sec = load(str(tmp_path / "k"))
    assert len(pub) == 40 and len(sec) == 40


def test_missing_keys_name_the_path(tmp_path):
    with pytest.raises(ConfigError, match=r"cluster.key_secret' is missing"):
        load(str(tmp_path))


def test_security_for_picks_curve_only_with_keys(tmp_path, monkeypatch):
    monkeypatch.delenv("STORMISH_KEYS", raising=False)
    assert isinstance(security_for(None), Loopback)
    create(str(tmp_path))
    assert isinstance(security_for(str(tmp_path)), Curve)
    monkeypatch.setenv("STORMISH_KEYS", str(tmp_path))
    assert isinstance(security_for(None), Curve)


def _pair(server_sec, client_sec):
    ctx = zmq.Context()
    srv = ctx.socket(zmq.PULL)
    srv.setsockopt(zmq.LINGER, 0)
    server_sec.server(srv)
    port = srv.bind_to_random_port("tcp://127.0.0.1")
    cli = ctx.socket(zmq.PUSH)
    cli.setsockopt(zmq.LINGER, 0)
    client_sec.client(cli)
    cli.connect(f"tcp://127.0.0.1:{port}")
    return ctx, srv, cli


def _close(ctx, sec, *socks):
    for s in socks:
        s.close(0)
    sec.release(ctx)
    ctx.term()


def test_curve_peers_with_the_cluster_key_talk(tmp_path):
    create(str(tmp_path))
    sec = Curve(str(tmp_path))
    ctx, srv, cli = _pair(sec, sec)
    try:
        cli.send(b"hello")
        assert srv.poll(10_000)
        assert srv.recv() == b"hello"
    finally:
        _close(ctx, sec, srv, cli)


@pytest.mark.parametrize("stranger", ["plain", "other keys"])
def test_a_peer_without_the_cluster_key_never_reaches_the_receiver(tmp_path, stranger):
    create(str(tmp_path / "ours"))
    create(str(tmp_path / "theirs"))
    ours = Curve(str(tmp_path / "ours"))
    if stranger == "plain":
        client = LOOPBACK
    else:
        theirs = Curve(str(tmp_path / "theirs"))
        theirs.public = ours.public  # knows our public key, but not our secret
        client = _ClientWithServerKey(theirs, ours.public)
    ctx, srv, cli = _pair(ours, client)
    try:
        cli.send(b"pickle bomb")
        # a real peer's message after the stranger's arrives; the stranger's never does
        peer = ctx.socket(zmq.PUSH)
        peer.setsockopt(zmq.LINGER, 0)
        ours.client(peer)
        peer.connect(srv.getsockopt_string(zmq.LAST_ENDPOINT))
        peer.send(b"member")
        assert srv.poll(10_000)
        assert srv.recv() == b"member"
        assert not srv.poll(300)
        peer.close(0)
    finally:
        _close(ctx, ours, srv, cli)


class _ClientWithServerKey:
    """Another cluster's key pair that knows our server's public key."""

    def __init__(self, curve, server_public):
        self.curve, self.server_public = curve, server_public

    def client(self, sock):
        sock.curve_secretkey = self.curve.secret
        sock.curve_publickey = zmq.curve_public(self.curve.secret)
        sock.curve_serverkey = self.server_public


def test_nimbus_addresses():
    assert nimbus_address("nimbus") == "tcp://nimbus:6627"
    assert nimbus_address("10.0.0.2:7000") == "tcp://10.0.0.2:7000"
    assert nimbus_address("tcp://h:1") == "tcp://h:1"
    with pytest.raises(StormishError, match="port 'x'"):
        nimbus_address("h:x")
    with pytest.raises(StormishError, match="names no host"):
        nimbus_address(":6627")


def test_store_keeps_state_and_skips_broken_entries(tmp_path, caplog):
    s = Store(str(tmp_path))
    s.save_topology("t", {"a": 1}, {"k": 2})
    s.save_state("t", {"status": "running", "slots": {"0": ["s", 1]}})
    os.makedirs(os.path.join(s.root, "broken"))
    assert s.load_all() == [
        ("t", {"a": 1}, {"k": 2}, {"status": "running", "slots": {"0": ["s", 1]}})
    ]
    assert "skipping stored topology 'broken'" in caplog.text  # logged, a warning
    s.forget("t")
    assert [n for n, *_ in s.load_all()] == []
