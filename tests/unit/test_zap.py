"""The ZAP handler: its answers (pure) and real CURVE handshakes on loopback."""

from __future__ import annotations

import pytest
import zmq
from zmq.utils import z85
from zmq.utils.monitor import recv_monitor_message

from stormish.transport import zap

KEY, _ = zmq.curve_keypair()  # the one key the handlers below let in
HANDSHAKE = (
    zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


@pytest.fixture
def handler():
    """A handler (not started: `answer` is pure) that lets in KEY; stopped after."""
    ctx = zmq.Context()
    h = zap.ZapHandler(ctx, {KEY}.__contains__)
    yield h
    h.stop()
    ctx.term()


def request(
    mechanism: bytes, *credentials: bytes, version: bytes = b"1.0", domain: bytes = b""
) -> list[bytes]:
    return [version, b"7", domain, b"127.0.0.1", b"", mechanism, *credentials]


def test_a_known_curve_key_is_let_in_with_a_connection_name_of_its_own(handler):
    raw = z85.decode(KEY)
    first = handler.answer(request(b"CURVE", raw))
    second = handler.answer(request(b"CURVE", raw))
    assert first[:4] == [b"1.0", b"7", b"200", b"OK"]
    assert first[4] == b"1 " + KEY and second[4] == b"2 " + KEY


def test_unknown_keys_other_mechanisms_and_malformed_requests_are_refused(handler):
    other, _ = zmq.curve_keypair()
    refused = [
        handler.answer(request(b"CURVE", z85.decode(other))),  # not a key of ours
        handler.answer(request(b"PLAIN", b"user", b"password")),
        handler.answer(request(b"GSSAPI")),
        handler.answer(request(b"CURVE")),  # no key
        handler.answer(request(b"CURVE", b"short")),
        handler.answer(request(b"CURVE", z85.decode(KEY), version=b"2.0")),
    ]
    for reply in refused:
        assert reply[2] == b"400" and reply[4] == b""  # no User-Id when refused
    assert handler.answer([b"1.0"])[2] == b"400"  # too few frames: still one reply
    assert handler.answer(request(b"NULL"))[2] == b"200"  # as pyzmq's: no socket of ours is NULL


def test_plain_is_let_in_only_with_the_password_of_its_sockets_domain(handler):
    handler.passwords[b"bulk-1"] = b"token-1"
    handler.passwords[b"bulk-2"] = b"token-2"
    let_in = handler.answer(request(b"PLAIN", b"anyone", b"token-1", domain=b"bulk-1"))
    assert let_in[2] == b"200" and let_in[4].endswith(b" plain")
    refused = [
        request(b"PLAIN", b"anyone", b"token-2", domain=b"bulk-1"),  # another socket's
        request(b"PLAIN", b"anyone", b"token-", domain=b"bulk-1"),
        request(b"PLAIN", b"anyone", b"token-1", domain=b""),  # a CURVE socket's domain
        request(b"PLAIN", b"anyone", b"token-1", domain=b"bulk-3"),
        request(b"PLAIN", b"token-1", domain=b"bulk-1"),  # no password frame
    ]
    for r in refused:
        reply = handler.answer(r)
        assert reply[2] == b"400" and reply[4] == b"", r


def test_real_plain_handshakes_the_token_is_heard_a_wrong_one_or_none_is_not():
    from stormish.errors import ConfigError
    from stormish.transport.security import LOOPBACK, Curve

    security = Curve.ephemeral()
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.linger = 0
    security.password_server(pull, b"the-token")
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    pushes = []

    def handshake(password: bytes | None) -> int:
        """Connect a PUSH with `password` (None: no credentials, NULL): the outcome of
        its handshake (a monitor event)."""
        push = ctx.socket(zmq.PUSH)
        push.linger = 0
        push.immediate = True  # queue only on a connection whose handshake completed
        pushes.append(push)
        if password is not None:
            push.plain_username, push.plain_password = b"bulk", password
        mon = push.get_monitor_socket(HANDSHAKE)
        push.connect(f"tcp://127.0.0.1:{port}")
        try:
            assert mon.poll(10_000), "no handshake outcome"
            return recv_monitor_message(mon)["event"]
        finally:
            push.disable_monitor()
            mon.close(0)

    try:
        for password in (None, b"the-toke", b"the-token!"):
            assert handshake(password) != zmq.EVENT_HANDSHAKE_SUCCEEDED, password
        assert handshake(b"the-token") == zmq.EVENT_HANDSHAKE_SUCCEEDED
        heard = pushes[-1]
        heard.send(b"ok")
        assert pull.poll(5000) and pull.recv() == b"ok"
        assert not pull.poll(100)
        with pytest.raises(ConfigError, match="needs keys"):
            LOOPBACK.password_server(pull, b"x")
    finally:
        for s in pushes:
            s.close()
        pull.close()
        security.release(ctx)
        ctx.term()


def test_real_handshakes_a_keyed_client_is_heard_an_unkeyed_one_is_not():
    server_pub, server_sec = zmq.curve_keypair()
    client_pub, client_sec = zmq.curve_keypair()
    stranger_pub, stranger_sec = zmq.curve_keypair()
    ctx = zmq.Context()
    h = zap.start(ctx, {client_pub}.__contains__)
    pull = ctx.socket(zmq.PULL)
    pull.linger = 0
    pull.curve_server = True
    pull.curve_publickey, pull.curve_secretkey = server_pub, server_sec
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    pushes = []

    def client(pub: bytes, sec: bytes) -> zmq.Socket:
        push = ctx.socket(zmq.PUSH)
        push.linger = 0
        push.sndtimeo = 1000
        push.immediate = True  # queue only on a connection whose handshake completed
        push.curve_serverkey = server_pub
        push.curve_publickey, push.curve_secretkey = pub, sec
        push.connect(f"tcp://127.0.0.1:{port}")
        pushes.append(push)
        return push

    try:
        # refused at the handshake: the push never has a peer to send to
        with pytest.raises(zmq.Again):
            client(stranger_pub, stranger_sec).send(b"forged")
        client(client_pub, client_sec).send(b"ok")
        assert pull.poll(5000), "the keyed client's message never came"
        frame = pull.recv(copy=False)
        assert frame.bytes == b"ok"
        assert frame.get("User-Id").endswith(client_pub.decode())
        assert not pull.poll(100)
    finally:
        for s in pushes:
            s.close()
        pull.close()
        h.stop()
        assert not h.is_alive()
        ctx.term()


def test_stopping_a_handler_that_never_started_closes_its_sockets():
    ctx = zmq.Context()
    zap.ZapHandler(ctx, set().__contains__).stop()
    ctx.term()  # returns: no socket of the handler is left open
