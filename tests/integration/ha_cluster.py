"""An HA cluster as real processes on 127.0.0.1: several `stormish nimbus --zookeeper`
(each its own data directory, the cluster's keys made by the first), supervisors given
every nimbus (`--nimbus a,b`), against the real ZooKeeper a test started
(tests/zk_server.py). Each cluster has a root znode of its own."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from contextlib import closing
from typing import Any

import psutil

from stormish.cluster.client import NimbusClient
from stormish.local.workers import _child_env
from stormish.testing import poll_for
from stormish.transport.keys import create
from stormish.transport.security import Curve

from .test_cluster import free_ports

_roots = itertools.count(1)


class HaCluster:
    def __init__(
        self,
        tmp: str,
        zk_hosts: str,
        nimbuses: int = 2,
        supervisors: int = 2,
        failover: float = 4.0,
        nimbus_args: tuple[str, ...] = (),
        zk_for: dict[int, str] | None = None,
    ):
        self.tmp = tmp
        self.zk_hosts = zk_hosts
        self.zk_for = zk_for or {}  # nimbus index -> its own way to ZooKeeper (a proxy)
        self.root = f"/stormish-test-{os.getpid()}-{next(_roots)}"
        self.failover = failover
        self.env = _child_env()
        self.env.pop("STORMISH_KEYS", None)
        self.keys = os.path.join(tmp, "keys")
        create(self.keys)
        self.env["STORMISH_KEYS"] = self.keys
        ports = free_ports(2 * nimbuses + 2 * supervisors)
        self.apis = ports[0 : 2 * nimbuses : 2]
        self.controls = ports[1 : 2 * nimbuses : 2]
        rest = ports[2 * nimbuses :]
        self.slots = [rest[i : i + 2] for i in range(0, len(rest), 2)]
        self.nimbus_args = nimbus_args
        self.nimbuses: list[subprocess.Popen | None] = [None] * nimbuses
        self.supervisors: list[subprocess.Popen] = []
        self.start_nimbus(0)
        self.wait_leader()  # the first leads: the tests know which
        for i in range(1, nimbuses):
            self.start_nimbus(i)
        for i in range(1, nimbuses):  # each in the election (it answers once it contends)
            poll_for(lambda i=i: self._answers(i), 60, 0.05, f"nimbus n{i} up")
        for i in range(supervisors):
            self.supervisors.append(self.start_supervisor(i))

    # -- daemons --------------------------------------------------------------------------------
    def _spawn(self, *args: str, log: str) -> subprocess.Popen:
        out = open(os.path.join(self.tmp, log), "ab")  # noqa: SIM115 - the child owns it
        with out:
            return subprocess.Popen(
                [sys.executable, "-m", "stormish.cli", *args],
                env=self.env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def start_nimbus(self, i: int) -> None:
        self.nimbuses[i] = self._spawn(
            "nimbus", "--port", str(self.apis[i]), "--control-port", str(self.controls[i]),
            "--data", os.path.join(self.tmp, f"n{i}-data"), "--task-timeout", "5",
            "--zookeeper", self.zk_for.get(i, self.zk_hosts), "--zk-root", self.root,
            "--id", f"n{i}",
            "-c", f"nimbus.leader.failover.secs={self.failover}", *self.nimbus_args,
            log=f"n{i}.log",
        )  # fmt: skip

    def start_supervisor(self, i: int) -> subprocess.Popen:
        return self._spawn(
            "supervisor", "--nimbus", self.nimbus_spec, "--id", f"s{i}",
            "--ports", ",".join(map(str, self.slots[i])),
            "--log-dir", os.path.join(self.tmp, f"s{i}-workers"), log=f"s{i}.log",
        )  # fmt: skip

    @property
    def nimbus_spec(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.apis)

    def kill_nimbus(self, i: int, sig: int = signal.SIGKILL) -> None:
        p = self.nimbuses[i]
        assert p is not None
        p.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            p.wait(30)

    # -- asking ---------------------------------------------------------------------------------
    def client(self, i: int) -> NimbusClient:
        return NimbusClient(f"127.0.0.1:{self.apis[i]}", Curve(self.keys), timeout=20)

    def call(self, i: int, verb: str, payload: Any = None) -> Any:
        with closing(self.client(i)) as c:
            return c.call(verb, payload)

    def _answers(self, i: int) -> bool:
        try:
            with closing(self.client(i)) as c:
                c.call("leader", timeout=2)
            return True
        except Exception:  # noqa: BLE001 - not up yet
            return False

    def leader(self, via: int | None = None) -> int | None:
        """The index of the nimbus that says it leads (asked of each live one)."""
        for i, p in enumerate(self.nimbuses):
            if p is None or p.poll() is not None or (via is not None and i != via):
                continue
            try:
                with closing(self.client(i)) as c:
                    if c.call("leader", timeout=2)["leading"]:
                        return i
            except Exception:  # noqa: BLE001 - a nimbus starting or stopped
                continue
        return None

    def wait_leader(self, not_: int | None = None, timeout: float = 60) -> int:
        found: list[int] = []

        def led() -> bool:
            i = self.leader()
            if i is not None and i != not_:
                found.append(i)
                return True
            return False

        poll_for(led, timeout, 0.05, "a nimbus leads")
        return found[-1]

    def status(self, i: int, name: str) -> str | None:
        return next((r["status"] for r in self.call(i, "list") if r["name"] == name), None)

    def wait_status(self, i: int, name: str, wanted: str, timeout: float = 60) -> None:
        poll_for(lambda: self.status(i, name) == wanted, timeout, 0.1, f"{name} {wanted}")

    def workers(self) -> list[psutil.Process]:
        out = []
        for s in self.supervisors:
            out += psutil.Process(s.pid).children()
        return out

    def assignments(self) -> list[dict[str, Any]]:
        """Who assigned what, read from ZooKeeper (the cluster's own record)."""
        from kazoo.client import KazooClient

        from stormish.cluster.ha import digest_credential
        from stormish.transport.keys import load

        _, secret = load(self.keys)
        zk = KazooClient(hosts=self.zk_hosts, auth_data=[("digest", digest_credential(secret))])
        zk.start(10)
        try:
            base = f"{self.root}/assignments"
            return [json.loads(zk.get(f"{base}/{n}")[0]) for n in sorted(zk.get_children(base))]
        finally:
            zk.stop()
            zk.close()

    def log(self, name: str) -> str:
        with open(os.path.join(self.tmp, name), errors="replace") as fh:
            return fh.read()

    def logs(self) -> list[str]:
        return [f"n{i}.log" for i in range(len(self.nimbuses))] + [
            f"s{i}.log" for i in range(len(self.supervisors))
        ]

    def close(self) -> None:
        procs = [*self.supervisors, *self.nimbuses]
        for p in procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
        for p in procs:
            if p is not None:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
