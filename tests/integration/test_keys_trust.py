"""With real processes and real CURVE handshakes: another user cannot
read the secret while it is made, and only keys an operator named are let in."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest
import zmq
import zmq.auth

from stormish import ConfigError
from stormish.testing import poll_for
from stormish.transport import keys
from stormish.transport.security import Curve

NOBODY = 65534
READER = r"""
import os, sys, time
base, held, i = sys.argv[1], [], 0
deadline = time.monotonic() + 60
print("ready", flush=True)
while time.monotonic() < deadline and not os.path.exists(os.path.join(base, "STOP")):
    if os.path.exists(os.path.join(base, f"k{i + 1}")):
        i += 1  # the next directory is being made: try its secret
    try:  # hold the descriptor: a chmod after the open does not take it back
        held.append(open(os.path.join(base, f"k{i}", "cluster.key_secret"), "rb"))
    except OSError:
        pass
print(sum(b"secret-key" in fh.read() for fh in held), len(held), flush=True)
"""


def _python_for(uid: int) -> str | None:
    """An interpreter another user may run (the test's own may sit under /root)."""
    for exe in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(exe):
            probe = subprocess.run(
                [exe, "-c", "pass"], preexec_fn=lambda: _become(uid), capture_output=True
            )
            if probe.returncode == 0:
                return exe
    return None


def _become(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def test_another_user_racing_the_creation_never_reads_the_secret():
    """As the issue's attacker: uid nobody opens `cluster.key_secret` in a loop (holding
    every descriptor it gets) while 100 key directories are made one after the other,
    with the usual umask 022. A file written then chmod-ed was read 10 times in 10."""
    if os.geteuid() != 0:
        pytest.skip("running the reader as another user (nobody) needs root")
    exe = _python_for(NOBODY)
    if exe is None:
        pytest.skip("no Python interpreter that uid nobody may run")
    base = tempfile.mkdtemp(prefix="stormish-keys-race-")
    os.chmod(base, 0o755)  # the attacker may look into the parent, as in /tmp or a home
    old = os.umask(0o022)
    reader = subprocess.Popen(
        [exe, "-c", READER, base], preexec_fn=lambda: _become(NOBODY),
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
        for i in range(100):
            keys.create(os.path.join(base, f"k{i}"))
        open(os.path.join(base, "STOP"), "w").close()
        out, _ = reader.communicate(timeout=90)
    finally:
        os.umask(old)
        if reader.poll() is None:
            reader.kill()
            reader.wait(10)
        shutil.rmtree(base, ignore_errors=True)
    read, opened = (int(x) for x in out.split())
    assert (read, opened) == (0, 0), f"uid nobody opened the secret {opened} times"


def _server(ctx: zmq.Context, sec: Curve) -> tuple[zmq.Socket, str]:
    pull = ctx.socket(zmq.PULL)
    pull.linger = 0
    sec.server(pull)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    return pull, f"tcp://127.0.0.1:{port}"


def _push(ctx: zmq.Context, address: str, public: bytes, secret: bytes, server: bytes):
    push = ctx.socket(zmq.PUSH)
    push.linger = 0
    push.sndtimeo = 1000
    push.immediate = True  # queue only on a connection whose handshake completed
    push.curve_serverkey = server
    push.curve_publickey, push.curve_secretkey = public, secret
    push.connect(address)
    return push


def test_a_key_dropped_in_the_directory_is_refused_an_authorised_one_is_let_in(tmp_path):
    """Before: every `*.key` in the directory was let in (zmq.auth.load_certificates)."""
    d = str(tmp_path / "keys")
    keys.create(d)
    stray_public, stray_secret = zmq.auth.create_certificates(d, "evil")  # as an attacker
    zmq.auth.create_certificates(str(tmp_path), "laptop")
    keys.authorize(d, str(tmp_path / "laptop.key"))
    cluster = Curve(d)
    ctx = zmq.Context()
    pull, address = _server(ctx, cluster)
    socks = [pull]
    try:
        evil = _push(ctx, address, *zmq.auth.load_certificate(stray_secret), cluster.public)
        socks.append(evil)
        with pytest.raises(zmq.Again):  # refused at the handshake: never a peer to send to
            evil.send(b"pickle bomb")
        laptop = zmq.auth.load_certificate(str(tmp_path / "laptop.key_secret"))
        ok = _push(ctx, address, *laptop, cluster.public)
        socks.append(ok)
        poll_for(lambda: _sent(ok, b"authorised"), timeout=10)
        assert pull.poll(10_000) and pull.recv() == b"authorised"
        assert not pull.poll(200)
    finally:
        for s in socks:
            s.close(0)
        cluster.release(ctx)
        ctx.term()


def _sent(sock: zmq.Socket, data: bytes) -> bool:
    try:
        sock.send(data, zmq.NOBLOCK)
        return True
    except zmq.Again:
        return False


def test_a_client_directory_talks_to_the_cluster_and_cannot_serve(tmp_path):
    cluster_dir, laptop_dir = str(tmp_path / "keys"), str(tmp_path / "laptop")
    keys.create(cluster_dir)
    keys.create_client(laptop_dir, cluster_dir)
    cluster, laptop = Curve(cluster_dir), Curve(laptop_dir)
    assert laptop.public != cluster.public and laptop.server_public == cluster.public
    ctx = zmq.Context()
    pull, address = _server(ctx, cluster)
    push = ctx.socket(zmq.PUSH)
    push.linger = 0
    laptop.client(push)
    push.connect(address)
    other = ctx.socket(zmq.PULL)
    try:
        push.send(b"submit")
        assert pull.poll(10_000) and pull.recv() == b"submit"
        with pytest.raises(ConfigError, match="are a client's"):
            laptop.server(other)
    finally:
        for s in (push, pull, other):
            s.close(0)
        cluster.release(ctx)
        ctx.term()
