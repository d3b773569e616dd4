"""A real ZooKeeper for the HA tests: Debian's `zookeeper` package (its jars under
/usr/share/java) run as a standalone server (`ZooKeeperServerMain`) on 127.0.0.1 on a
free port with a temporary data directory and the admin server off; stopped (and waited
for) at the end. Tests that need one are skipped, saying why, only where java, the
package or kazoo is missing (.ci/run installs them)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

from stormish.testing import poll_for

JARS = "/usr/share/java"
NEEDED = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-nop.jar",
          "netty-handler.jar", "netty-common.jar", "netty-buffer.jar", "netty-transport.jar",
          "netty-codec.jar", "netty-resolver.jar", "netty-transport-native-epoll.jar",
          "netty-transport-native-unix-common.jar", "metrics-core.jar", "commons-cli.jar",
          "commons-io.jar", "snappy-java.jar")  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int) -> bool:
    """ZooKeeper's four-letter `ruok`: `imok` once it serves."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False


class ZooKeeper:
    """One standalone server; `stop()` and `start()` again on the same port and data
    (the outage tests), `close()` at the end."""

    def __init__(self) -> None:
        java = shutil.which("java")
        if java is None:
            pytest.skip("no java on this machine (apt-get install -y zookeeper pulls it in)")
        missing = [j for j in NEEDED if not os.path.exists(os.path.join(JARS, j))]
        if missing:
            pytest.skip(f"no ZooKeeper jars ({', '.join(missing)}): apt-get install -y zookeeper")
        pytest.importorskip(
            "kazoo", reason="kazoo is not installed: pip install 'stormish[zookeeper]'"
        )
        self.java = java
        self.dir = tempfile.mkdtemp(prefix="stormish-zk-")
        self.port = free_port()
        self.cfg = os.path.join(self.dir, "zoo.cfg")
        with open(self.cfg, "w") as fh:
            fh.write(
                f"tickTime=500\ndataDir={self.dir}/data\nclientPort={self.port}\n"
                "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                "4lw.commands.whitelist=ruok\nminSessionTimeout=1000\nmaxSessionTimeout=60000\n"
            )
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        cp = ":".join(os.path.join(JARS, j) for j in NEEDED)
        self.proc = subprocess.Popen(
            [self.java, "-Xmx256m", "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain",
             self.cfg],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        proc = self.proc
        poll_for(lambda: answers(self.port) or proc.poll() is not None, 60, 0.05, "zookeeper")
        if proc.poll() is not None:
            raise RuntimeError(f"zookeeper exited with {proc.returncode} on port {self.port}")

    def stop(self) -> None:
        """kill -9: a crashed server (its data directory stays for `start`)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def zookeeper() -> Iterator[ZooKeeper]:
    zk = ZooKeeper()
    try:
        yield zk
    finally:
        zk.close()


class Partition:
    """A TCP proxy in front of ZooKeeper that a test cuts (a network partition: what
    either side sends goes nowhere, the connections stay open, as when a link drops
    packets) and heals (the connections are closed; the client reconnects)."""

    def __init__(self, target_port: int) -> None:
        import threading

        self.target = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.cut_off = threading.Event()
        self.stopped = threading.Event()
        self.socks: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._spawn(self._accept)

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _spawn(self, fn, *args) -> None:  # type: ignore[no-untyped-def]
        import threading

        t = threading.Thread(target=fn, args=args, daemon=True)
        self.threads.append(t)
        t.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", self.target), timeout=2)
            except OSError:
                conn.close()
                continue
            with self._lock:
                self.socks += [conn, up]
            self._spawn(self._pump, conn, up)
            self._spawn(self._pump, up, conn)

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        a.settimeout(0.1)
        while not self.stopped.is_set():
            try:
                data = a.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            if self.cut_off.is_set():
                continue  # the partition: dropped
            try:
                b.sendall(data)
            except OSError:
                break
        for s in (a, b):
            s.close()

    def cut(self) -> None:
        self.cut_off.set()

    def heal(self) -> None:
        with self._lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.cut_off.clear()

    def close(self) -> None:
        self.stopped.set()
        self.heal()
        self.listener.close()
        for t in self.threads:
            t.join(5)
