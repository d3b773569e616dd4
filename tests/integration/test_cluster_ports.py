"""Slot ports on a real cluster: two supervisors on one host left at
the same ports, a port taken before a supervisor starts, a port taken later by another
program, and `kill` of a topology that failed. Real daemons (`Cluster`), real sockets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from stormish import BasicBolt, Topology, WorkerError
from stormish.testing import ListSpout, poll_for

from .harness import no_process_left
from .test_cluster import (
    SENTENCES,
    WORDS,
    Cluster,
    _cli,
    free_ports,
    wordcount,
)


@pytest.fixture
def procs_checked():
    """Every process a test started is gone at its end."""
    with no_process_left():
        yield


def listen(port: int) -> socket.socket:
    """Another program on `port` (as a worker would listen: all addresses)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen()
    return s


def supervisor_cmd(cluster: Cluster, sid: str, ports: list[int]) -> list[str]:
    return [
        sys.executable, "-m", "stormish.cli", "supervisor", "--nimbus",
        f"127.0.0.1:{cluster.api}", "--id", sid, "--ports", ",".join(map(str, ports)),
        "--log-dir", os.path.join(cluster.tmp, f"{sid}-workers"),
    ]  # fmt: skip


def test_a_supervisor_whose_slot_port_is_taken_refuses_to_start(tmp_path, procs_checked):
    c = Cluster(str(tmp_path), supervisors=0)
    try:
        port, other = free_ports(2)
        with listen(port):
            r = subprocess.run(
                supervisor_cmd(c, "sx", [other, port]), env=c.env, capture_output=True,
                text=True, timeout=60,
            )  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert f"slot port {port}" in r.stderr and "--ports" in r.stderr, r.stderr
        assert f"by pid {os.getpid()}" in r.stderr, r.stderr  # the holder, named
        assert "Traceback" not in r.stderr, r.stderr
    finally:
        c.close()


def test_two_supervisors_on_one_host_with_the_same_ports_run_a_topology(tmp_path, procs_checked):
    """Both offer the same two ports on 127.0.0.1: nimbus warns, and places the two
    workers on two different ports (before: both on the first, the second worker could
    not listen and the topology failed)."""
    c = Cluster(str(tmp_path), supervisors=1)
    try:
        c.supervisors.append(c._spawn(*supervisor_cmd(c, "s1", c.slots[0])[3:], log="s1.log"))
        poll_for(lambda: len(c.call("supervisors")) == 2, 30, 0.1, "both supervisors joined")
        assert c.call("submit", (wordcount("twin", workers=2), {})) == "twin"
        c.wait_status("twin", "complete")
        assert c.call("stats", "twin").components["count"].executed == WORDS
        row = next(r for r in c.call("list") if r["name"] == "twin")
        assert row["error"] is None, row
        poll_for(
            lambda: "all offer port" in c.log("nimbus.log"), 30, 0.1, "nimbus warned"
        )  # fmt: skip
        log = c.log("nimbus.log")
        assert "supervisors s0, s1 on host" in log and "own --ports" in log, log
    finally:
        c.close()
        print(c.log("nimbus.log")[-3000:])


def test_a_port_taken_later_is_a_failed_slot_and_the_worker_goes_elsewhere(tmp_path, procs_checked):
    """Another program listens on s0's first port after s0 started: s0 does not start
    the worker there but reports the port; nimbus places the worker on s1's slot and the
    topology completes. `list` shows the failed port; once free it is offered again."""
    c = Cluster(str(tmp_path))
    try:
        poll_for(lambda: len(c.call("supervisors")) == 2, 30, 0.1, "both supervisors joined")
        taken = min(c.slots[0])  # where the scheduler puts a lone worker: s0, lowest port
        squatter = listen(taken)
        try:
            assert c.call("submit", (wordcount("moved", workers=1), {})) == "moved"
            c.wait_status("moved", "complete")
            assert c.call("stats", "moved").components["count"].executed == WORDS
            row = next(r for r in c.call("list") if r["name"] == "moved")
            assert row["error"] is None and row["status"] == "complete", row
            log = c.log("nimbus.log")
            assert f"slot port {taken} failed" in log, log
            assert "worker 0 leaves supervisor s0" in log, log
            s0 = next(s for s in c.call("supervisors") if s["id"] == "s0")
            assert str(taken) in s0["failed_ports"], s0
            listed = _cli(c, "list")
            assert f"slot port {taken} failed" in listed.stdout, listed.stdout
        finally:
            squatter.close()
        poll_for(
            lambda: not next(s for s in c.call("supervisors") if s["id"] == "s0")["failed_ports"],
            30, 0.1, "the port offered again once free",
        )  # fmt: skip
    finally:
        c.close()


class Broken(BasicBolt):
    def prepare(self, conf, context):
        raise RuntimeError("broken on purpose")

    def execute(self, tup):
        pass


def test_kill_of_a_failed_topology_removes_it(tmp_path, procs_checked):
    """Before: `kill` said `killing ...` and `list` still showed it `failed`."""
    c = Cluster(str(tmp_path))
    try:
        t = Topology("broken", config={"topology.workers": 1})
        t.set_spout("s", ListSpout([[s] for s in SENTENCES[:5]], fields=["sentence"]))
        t.set_bolt("b", Broken()).shuffle_grouping("s")
        c.call("submit", (t, {}))
        c.wait_status("broken", "failed")
        out = _cli(c, "kill", "broken")
        assert out.returncode == 0, out.stderr
        assert "removed topology 'broken' (it had failed)" in out.stdout, out.stdout
        assert all(r["name"] != "broken" for r in c.call("list"))
        assert "broken" not in _cli(c, "list").stdout
        # the name is free: submitted again, it is a new topology
        c.call("submit", (wordcount("broken", workers=1), {}))
        c.wait_status("broken", "complete")
    finally:
        c.close()


def test_a_worker_whose_port_is_taken_after_the_check_exits_98_not_answering(procs_checked):
    """The instant between the supervisor's check and the worker's bind: the worker does
    not answer `assign` with an error (which failed the topology) but exits 98, which its
    supervisor takes as a failed slot (the next test)."""
    import shutil

    import cloudpickle

    from stormish.local.process import PORT_TAKEN_EXIT
    from stormish.local.workers import _child_env
    from stormish.runtime.acker import AckerBolt
    from stormish.runtime.plan import build_plan
    from stormish.transport.control_server import ControlServer
    from stormish.transport.security import Curve

    t = wordcount("solo", workers=1)
    conf = t.validate({})
    plan = build_plan(t, conf, AckerBolt())
    security = Curve.ephemeral()
    server = ControlServer(security=security)
    (port,) = free_ports(1)
    squatter = listen(port)
    exe = shutil.which("stormish") or sys.executable
    cmd = [exe, "worker"] if exe != sys.executable else [exe, "-m", "stormish.cli", "worker"]
    proc = subprocess.Popen(
        [*cmd, "--control", server.address, "--index", "0", "--parent", str(os.getpid()),
         "--topology", "solo", "--keys", "-", "--bind", f"tcp://0.0.0.0:{port}"],
        env=_child_env(), stdin=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    proc.stdin.write(security.export())
    proc.stdin.close()
    try:
        ident = server.wait_hello("solo", 0, proc.pid, lambda: proc.poll() is None, 30)
        blob = cloudpickle.dumps((t, conf, dict(plan.assignment)))
        with pytest.raises(WorkerError):  # no answer: it is gone
            server.request(ident, "assign", blob, lambda: proc.poll() is None, 30, "solo")
        assert proc.wait(30) == PORT_TAKEN_EXIT
        assert f"cannot listen on tcp://0.0.0.0:{port}" in proc.stderr.read().decode()
    finally:
        squatter.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        server.close()


def test_a_supervisor_takes_a_worker_exiting_98_as_a_failed_slot(procs_checked):
    from stormish.cluster.supervisor import Slot, Supervisor
    from stormish.local.process import PORT_TAKEN_EXIT
    from stormish.transport.security import LOOPBACK

    (port,) = free_ports(1)
    sup = Supervisor("tcp://127.0.0.1:9", [port], "127.0.0.1", LOOPBACK)
    try:
        squatter = listen(port)  # taken after the supervisor started
        proc = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({PORT_TAKEN_EXIT})"])
        proc.wait(30)
        sup.slots[("t", 0)] = Slot("t", 0, port, "tcp://127.0.0.1:9", proc=proc)
        sup._watch()
        assert ("t", 0) not in sup.slots  # not restarted on the taken port: let go
        report = sup.report()
        assert "Address already in use" in report["failed_ports"][str(port)], report
        assert report["workers"] == {}
        # nimbus still wants it there (it has not heard yet): not started on the taken port
        sup.reconcile([{"topology": "t", "index": 0, "port": port, "control": "tcp://x:1"}])
        assert sup.slots == {}
        squatter.close()
        assert sup.report()["failed_ports"] == {}  # free again: a slot again
    finally:
        sup.close()


def _daemon(*args: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stormish.cli", *args], capture_output=True, text=True,
        timeout=30, cwd=tmp_path,
    )  # fmt: skip


def test_a_nimbus_whose_port_is_taken_says_so_without_a_traceback(tmp_path, procs_checked):
    """It was a ZMQError traceback, exit 1 (found by a bug hunt)."""
    port, control = free_ports(2)
    data = str(tmp_path / "data")
    for api_port, ctl_port, taken in ((port, control, port), (port, control, control)):
        with listen(taken):
            r = _daemon(
                "nimbus", "--insecure", "--data", data, "--port", str(api_port),
                "--control-port", str(ctl_port), tmp_path=tmp_path,
            )  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert "nimbus cannot listen: Address already in use" in r.stderr, r.stderr
        assert f":{taken}" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nimbus", "--port", "70000"], "'--port': 70000 is not in the range 1<=x<=65535"),
        (["nimbus", "--worker-timeout", "-1"], "'--worker-timeout': -1.0 is not in the range"),
        (["supervisor", "--ports", "70000"], "--ports '70000': 70000 is not a port (1-65535)"),
        (["supervisor", "--ports", ","], "--ports ',': at least one port"),
        (["supervisor", "--ports", "0"], "--ports '0': 0 is not a port (1-65535)"),
        (["supervisor", "--ports", "45991,45991"], "port 45991 given twice"),
    ],
)
def test_daemon_options_that_cannot_be_right_are_refused(tmp_path, procs_checked, args, says):
    """Each was accepted (nimbus listened elsewhere than its banner said; a slot on port
    0; two slots on one port) or a traceback (found by a bug hunt)."""
    extra = ["--data", str(tmp_path / "d")] if args[0] == "nimbus" else ["--nimbus", "127.0.0.1:1"]
    r = _daemon(args[0], "--insecure", *extra, *args[1:], tmp_path=tmp_path)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr, r.stderr
