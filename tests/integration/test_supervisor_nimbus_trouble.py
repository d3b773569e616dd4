"""What a supervisor says when nimbus does not take it: given a client's keys it
refuses to start (its workers could not listen: before, it joined nimbus as an
authorised client and every worker it started failed, restarted for ever); with other
keys than nimbus's, the failed handshake is said; nimbus silent (stopped, out of reach)
is said once, and its answer again. Real daemons on 127.0.0.1."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from stormish.cluster.supervisor import Supervisor
from stormish.errors import ConfigError
from stormish.testing import poll_for
from stormish.transport import keys
from stormish.transport.security import Curve

from .test_cluster import Cluster, _child_env, free_ports

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def nimbus(tmp_path) -> Iterator[Cluster]:
    c = Cluster(str(tmp_path), supervisors=0)
    try:
        yield c
    finally:
        if c.nimbus is not None:
            c.nimbus.send_signal(signal.SIGCONT)
            c.nimbus.kill()
            c.nimbus.wait(30)


@contextmanager
def serving(sup: Supervisor) -> Iterator[Supervisor]:
    t = threading.Thread(target=sup.serve, daemon=True)
    t.start()
    try:
        yield sup
    finally:
        sup.stop()
        t.join(30)
        sup.close()


def test_a_supervisor_given_a_clients_keys_refuses_to_start(tmp_path):
    cluster_dir, laptop_dir = str(tmp_path / "keys"), str(tmp_path / "laptop")
    keys.create(cluster_dir)
    keys.create_client(laptop_dir, cluster_dir)
    (port,) = free_ports(1)
    with pytest.raises(ConfigError, match="are a client's.*cluster's keys"):
        Supervisor("tcp://127.0.0.1:9", [port], "127.0.0.1", Curve(laptop_dir))
    env = _child_env()
    env.pop("STORMISH_KEYS", None)
    out = subprocess.run(
        [sys.executable, "-m", "stormish.cli", "supervisor", "--nimbus", "127.0.0.1:9",
         "--ports", str(port), "--keys", laptop_dir],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0
    assert "are a client's" in out.stderr and laptop_dir in out.stderr, out.stderr


def test_a_supervisor_with_other_keys_than_nimbus_says_the_handshake_failed(
    nimbus, tmp_path, caplog
):
    other = str(tmp_path / "other-keys")
    keys.create(other)
    (port,) = free_ports(1)
    address = f"tcp://127.0.0.1:{nimbus.api}"
    sup = Supervisor(address, [port], "127.0.0.1", Curve(other), heartbeat=0.2)
    with caplog.at_level(logging.WARNING, "stormish.supervisor"), serving(sup):
        poll_for(lambda: "handshake with nimbus" in caplog.text, 30, 0.05, "the warning")
    said = [r.getMessage() for r in caplog.records if "handshake" in r.getMessage()]
    assert len(said) == 1, said  # once, not at every reconnect
    assert address in said[0] and other in said[0]
    assert "no answer from nimbus" not in caplog.text  # the handshake says more


def test_a_silent_nimbus_is_said_once_and_its_answer_again(nimbus, caplog):
    (port,) = free_ports(1)
    sup = Supervisor(
        f"tcp://127.0.0.1:{nimbus.api}", [port], "127.0.0.1", Curve(nimbus.keys),
        heartbeat=0.1,
    )  # fmt: skip
    with caplog.at_level(logging.INFO, "stormish.supervisor"), serving(sup):
        poll_for(lambda: sup.nimbus_heard is not None, 30, 0.05, "nimbus heard")
        assert "no answer" not in caplog.text
        nimbus.nimbus.send_signal(signal.SIGSTOP)
        poll_for(lambda: "no answer from nimbus" in caplog.text, 30, 0.05, "the warning")
        nimbus.nimbus.send_signal(signal.SIGCONT)
        poll_for(lambda: "answers" in caplog.text, 30, 0.05, "nimbus answers again")
    warned = [r for r in caplog.records if "no answer from nimbus" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING
