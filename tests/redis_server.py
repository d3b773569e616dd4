"""A real redis-server for the state tests: started on 127.0.0.1 on a free port with
nothing saved to disk, stopped (and waited for) at the end. Tests that need one are
skipped, saying why, only where Debian's redis-server package is not installed (.ci/run
installs it)."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator

import pytest
from brokers import stop_process  # tests/ is on sys.path (pytest rootdir-relative modules)

from stormish.testing import poll_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def redis_server() -> Iterator[str]:
    """Yields the server's URL."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("no redis-server on this machine (apt-get install -y redis-server)")
    pytest.importorskip("redis", reason="redis-py is not installed: pip install 'stormish[redis]'")
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        poll_for(lambda: _answers(port) or proc.poll() is not None, 10, 0.02, "redis-server")
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {proc.returncode} on port {port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_process(proc)
