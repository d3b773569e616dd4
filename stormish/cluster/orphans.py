"""Workers a previous supervisor left behind on this host's slot ports.

A worker exits by itself once its supervisor is gone (`--parent`), but not at once: it
notices within a poll, and a hung or stopped one never does. A supervisor restarted on the
same ports (kill -9, then systemd starting it again) would then find its own ports taken
and refuse to start. Storm's supervisor kills the workers it finds that no live supervisor
owns before it takes its slots; so does this one: a process listening on one of its ports
whose command line is a stormish worker (`stormish.local.process`) and whose `--parent`
supervisor no longer runs is stopped. Anything else on the port is another program's, and
the supervisor refuses to start, naming it.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psutil

WORKER_MODULE = "stormish.local.process"
STOP_WAIT = 5.0  # seconds for a SIGTERM, then SIGKILL


def listener(port: int) -> psutil.Process | None:
    """The process listening on TCP `port` on any address, when this user may see it."""
    with contextlib.suppress(psutil.Error):
        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
                return psutil.Process(c.pid)
    return None


def orphaned_worker(proc: psutil.Process) -> int | None:
    """The dead supervisor's pid when `proc` is a stormish worker whose supervisor is
    gone; None when it is anything else (another program, or a live supervisor's)."""
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return None
    if WORKER_MODULE not in cmd or "--parent" not in cmd:
        return None
    i = cmd.index("--parent")
    try:
        parent = int(cmd[i + 1])
    except (IndexError, ValueError):
        return None
    if _alive(parent) and parent == _ppid(proc):
        return None  # its supervisor still runs: not ours to stop
    return parent


def stop(proc: psutil.Process) -> None:
    """SIGTERM, then SIGKILL after STOP_WAIT; a stopped (SIGSTOP) process is continued so
    it can die of the TERM."""
    with contextlib.suppress(psutil.Error):
        proc.terminate()
        proc.resume()
        try:
            proc.wait(STOP_WAIT)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_WAIT)


def describe(proc: psutil.Process | None) -> str:
    if proc is None:
        return ""
    try:
        return f" by pid {proc.pid} ({' '.join(proc.cmdline())[:120]})"
    except psutil.Error:
        return f" by pid {proc.pid}"


def _alive(pid: int) -> bool:
    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _ppid(proc: Any) -> int | None:
    try:
        return int(proc.ppid())
    except psutil.Error:
        return None
