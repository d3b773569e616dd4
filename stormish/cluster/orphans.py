"""Workers a previous supervisor left behind on this host's slot ports.

A worker exits by itself once its supervisor is gone (`--parent`), but not at once: it
notices within a poll, and a hung or stopped one never does. A supervisor restarted on the
same ports (kill -9, then systemd starting it again) would then find its own ports taken
and refuse to start. Storm's supervisor kills the workers it finds that no live supervisor
owns before it takes its slots; so does this one: a process listening on one of its ports
whose command line is a stormish worker (`stormish.local.process`) and whose `--parent`
supervisor no longer runs is stopped, and so is a forked worker (named `stormish-worker`:
its command line is its supervisor's) whose fork server or supervisor is gone. Anything
else on the port is another program's, and the supervisor refuses to start, naming it.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psutil

from ..local.forkserver import SERVER_NAME, WORKER_NAME

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
        name = proc.name()
    except psutil.Error:
        return None
    if name == WORKER_NAME:  # forked: its parent was its supervisor's fork server
        return _forked_orphan(proc)
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


def _forked_orphan(proc: psutil.Process) -> int | None:
    """A forked worker's parent is its supervisor's fork server, which ends with its
    supervisor: orphaned once its parent is no fork server or that server's supervisor
    is gone. The supervisor's pid when known (else the worker's parent's)."""
    try:
        parent = proc.parent()
        if parent is None or parent.name() != SERVER_NAME:
            return _ppid(proc) or 0
        owner = parent.ppid()
    except psutil.Error:
        return 0
    return None if _alive(owner) else owner


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
