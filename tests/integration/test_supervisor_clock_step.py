"""A step of the wall clock (NTP, a resumed VM) must not decide which workers are
silent: the supervisor measured silence as wall clock minus the heartbeat file's mtime,
so a step forward past the worker timeout killed every worker at once (a restart of the
whole topology, replays), and a step back hid a hung worker for as long as the step.
Silence is now a change of mtime seen on the monotonic clock. The worker here is a real
process touching its heartbeat file as a worker does; the step is the supervisor's
`time.time` moved (the monotonic clock does not step)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from stormish.cluster import supervisor as supervisor_mod
from stormish.cluster.supervisor import Slot, Supervisor
from stormish.testing import poll_for
from stormish.transport.security import LOOPBACK

from .test_cluster import free_ports

pytestmark = pytest.mark.timeout(60)

BEATER = """
import os, sys, time
path, every = sys.argv[1], float(sys.argv[2])
while True:
    with open(path, "a"):
        os.utime(path)
    if every < 0:  # touched once, then hung
        time.sleep(3600)
    time.sleep(every)
"""


@pytest.fixture
def sup() -> Iterator[Supervisor]:
    (port,) = free_ports(1)
    s = Supervisor("tcp://127.0.0.1:9", [port], "127.0.0.1", LOOPBACK, worker_timeout=1.5)
    s.launched = []  # type: ignore[attr-defined]
    s._launch = s.launched.append  # type: ignore[method-assign] # no real restart
    try:
        yield s
    finally:
        for slot in s.slots.values():
            if slot.proc is not None:
                slot.proc.kill()
                slot.proc.wait(10)
        s.close()


def worker(sup: Supervisor, tmp_path, every: float) -> Slot:
    beat = str(tmp_path / "t-0.heartbeat")
    proc = subprocess.Popen([sys.executable, "-c", BEATER, beat, str(every)])
    s = Slot("t", 0, sup.ports[0], "tcp://127.0.0.1:9", proc=proc)
    s.heartbeat_file = beat
    s.started = s.beat_seen = time.monotonic()
    sup.slots[("t", 0)] = s
    poll_for(lambda: (tmp_path / "t-0.heartbeat").exists(), 30, 0.02, "the first beat")
    return s


def step(monkeypatch, seconds: float) -> None:
    real = time.time
    clock = SimpleNamespace(time=lambda: real() + seconds, monotonic=time.monotonic)
    monkeypatch.setattr(supervisor_mod, "time", clock)


def test_a_step_forward_of_the_wall_clock_kills_no_beating_worker(sup, tmp_path, monkeypatch):
    s = worker(sup, tmp_path, 0.1)
    sup._watch()
    step(monkeypatch, 300.0)  # past the worker timeout, many times over
    end = time.monotonic() + 3 * sup.worker_timeout
    while time.monotonic() < end:  # a supervisor's turns meanwhile
        sup._watch()
        time.sleep(0.05)
    assert s.proc.poll() is None and sup.launched == [], s.last_exit


def test_a_step_back_of_the_wall_clock_does_not_hide_a_hung_worker(sup, tmp_path, monkeypatch):
    s = worker(sup, tmp_path, -1)  # one beat, then nothing
    step(monkeypatch, -300.0)

    def killed() -> bool:
        sup._watch()
        return s.proc.poll() is not None

    poll_for(killed, 10 * sup.worker_timeout, 0.05, "the hung worker stopped")
    assert "silent for" in (s.last_exit or ""), s.last_exit
