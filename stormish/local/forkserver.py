"""A fork server per run: worker processes at the cost of a fork, not of an interpreter.

A worker started as `python -m stormish.local.process` pays Python's start-up and the
import of stormish, ZeroMQ, cloudpickle and the runtime (~100-200 ms a worker on two
cores, all of it before it says hello), and then the topology module again when its
topology is unpickled. The fork server has imported all of that once; each worker is a
fork of it, and learns what it is (its index, the control address, its key pair) over
the fork server's private socket after the fork, never through argv or the environment.

How the server comes to be: when this process has one thread (no native thread either:
no ZeroMQ context with sockets, no ZAP handler, no pump) it forks the server from itself,
so the server has what this process imported, the topology module included; otherwise
(a test process, a program with threads) forking is not safe, and the server is a fresh
interpreter (`python -m stormish.local.forkserver --fd N`) that imports the worker's
modules and, when given the topology, unpickles it once. Either way no ZeroMQ context
exists in the server: each worker makes its own after the fork (contexts are not
fork-safe).

The protocol (`_send`/`_recv`): length-prefixed pickles on a private socketpair (the
server is this process's child: the pickles are trusted), file descriptors (a worker's
stdout and stderr pipes) as SCM_RIGHTS on the first byte of their message. Requests:
`("fork", spec)` with two descriptors, answered `("forked", pid)`; `("signal", pid,
signum)` (only a child not yet reaped is signalled: no pid reuse race); `("preload",
blob)`. Events: `("exit", pid, code)` when a worker ended (code as Popen's returncode:
negative for a signal). The server exits when this end closes; its workers notice their
parent changed within a poll (`--parent`) and stop.
"""

from __future__ import annotations

import array
import io
import os
import pickle
import queue
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any

_HEAD = struct.Struct("!I")
_MAX_FDS = 4
# what a worker imports: imported by the server once, so a forked worker has them
WORKER_MODULES = (
    "zmq",
    "cloudpickle",
    "stormish.local.process",
    "stormish.runtime.worker",
    "stormish.runtime.plan",
    "stormish.runtime.acker",
    "stormish.transport.link",
)
START_TIMEOUT = 60.0
# process names (Linux's comm, `ps -o comm`, psutil's name()): a fork has its parent's
# command line, so these say what it is (cluster/orphans.py looks for a worker's)
SERVER_NAME = "stormish-forks"
WORKER_NAME = "stormish-worker"


# STORMISH_START_TRACE=FILE: each process of a local run appends "<unix time> <pid>
# <event>" lines to FILE at the steps of its start and end (bench/peers.py --startup
# --trace prints the timeline). Off (the default), `mark` is one test of a global.
_TRACE = os.environ.get("STORMISH_START_TRACE") or None


def mark(event: str) -> None:
    """A step of the start-up or shutdown, when STORMISH_START_TRACE names a file."""
    if _TRACE is not None:
        import time

        line = f"{time.time():.6f} {os.getpid()} {event}\n".encode()
        fd = os.open(_TRACE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def set_name(name: str) -> None:
    """This process's name (PR_SET_NAME, 15 bytes at most); nothing where unsupported."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _send(sock: socket.socket, msg: Any, fds: tuple[int, ...] = ()) -> None:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    data = _HEAD.pack(len(data)) + data
    if fds:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        sent = sock.sendmsg([data[:1]], anc)
        data = data[sent:]
    sock.sendall(data)


def _recv_exactly(sock: socket.socket, n: int, fds: list[int]) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk, anc, _flags, _addr = sock.recvmsg(n - len(buf), socket.CMSG_SPACE(_MAX_FDS * 4))
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(payload[: len(payload) - len(payload) % got.itemsize])
                fds.extend(got)
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket) -> tuple[Any, list[int]] | None:
    """A message and the descriptors that came with it; None at end of stream."""
    fds: list[int] = []
    head = _recv_exactly(sock, _HEAD.size, fds)
    if head is None:
        return None
    body = _recv_exactly(sock, _HEAD.unpack(head)[0], fds)
    if body is None:
        return None
    return pickle.loads(body), fds


def native_threads() -> int:
    """Threads of this process, native ones included (a ZeroMQ context's I/O threads);
    0 when the system does not say (no /proc)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def supported() -> bool:
    """A fork server runs here: fork, and pidfds to see its children end (Linux 5.3+);
    elsewhere workers are spawned."""
    return hasattr(os, "fork") and hasattr(os, "pidfd_open")


def can_fork_here() -> bool:
    """Forking this process is safe: it has one thread (a fork copies locks other
    threads may hold, and a ZeroMQ context's threads do not survive it)."""
    return supported() and native_threads() == 1


# -- the server ------------------------------------------------------------------------------


def _reset_signals() -> None:
    """Handlers the parent set (a CLI's SIGINT/SIGTERM, a test runner's alarm) are not
    the child's: back to Python's defaults."""
    for sig in signal.valid_signals():
        try:
            handler = signal.getsignal(sig)
        except (OSError, ValueError):
            continue
        if callable(handler) and handler is not signal.default_int_handler:
            signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _after_fork() -> None:
    """What a forked process (server or worker) must not keep of its parent."""
    import atexit
    import faulthandler
    import gc

    gc.freeze()  # the parent's objects are never collected here (nor written on: CoW)
    atexit._clear()  # the parent's exit handlers are the parent's
    if faulthandler.is_enabled():  # points at a descriptor of the parent's (a test's)
        faulthandler.disable()
    faulthandler.cancel_dump_traceback_later()
    _reset_signals()


def serve(sock: socket.socket) -> int:
    """The server's loop: fork workers on request, report each one's end."""
    children: dict[int, int] = {}  # pidfd -> pid, while not reaped
    set_name(SERVER_NAME)
    for name in WORKER_MODULES:
        __import__(name)
    mark("fork server ready")
    me = sock.fileno()
    while True:
        # poll, not select: a run's process with 1,024 open files gives us descriptors
        # past select's limit (ValueError: the server died, "did not answer")
        poller = select.poll()
        for fd in (me, *children):
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll():
            if fd == me:
                got = _recv(sock)
                if got is None:
                    return 0  # the run is over (or its process died): so are we
                _handle(sock, got[0], got[1], children)
            else:
                pid = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                _send(sock, ("exit", pid, os.waitstatus_to_exitcode(status)))


def _handle(sock: socket.socket, msg: tuple, fds: list[int], children: dict[int, int]) -> None:
    verb = msg[0]
    if verb == "fork":
        try:
            pid = os.fork()
        except OSError as exc:  # out of processes or memory: this worker is not started
            for fd in fds:
                os.close(fd)
            _send(sock, ("failed", f"fork: {exc}"))
            return
        if pid == 0:  # the worker: never returns
            sock.close()
            for pidfd in children:
                os.close(pidfd)
            _worker_child(msg[1], fds)
        for fd in fds:
            os.close(fd)
        children[os.pidfd_open(pid)] = pid
        _send(sock, ("forked", pid))
    elif verb == "signal":
        pid, signum = msg[1], msg[2]
        if pid in children.values():
            os.kill(pid, signum)
    elif verb == "preload":  # the topology's modules, imported once for every worker
        import cloudpickle

        try:
            cloudpickle.loads(msg[1])
        except Exception:  # noqa: S110 - each worker's assign unpickles it and says why
            pass


def _worker_child(spec: dict[str, Any], fds: list[int]) -> None:
    """In the forked worker: its own stdio, signals and exit, then the worker's loop."""
    code = 1
    try:
        mark(f"worker {spec.get('index')} forked")
        _after_fork()
        set_name(WORKER_NAME)
        np_random = sys.modules.get("numpy.random")
        if np_random is not None:  # as a spawned worker's: not every worker the same draws
            np_random.seed()
        out, err = fds[:2]
        if len(fds) > 2:  # the run's nudge pipe (runtime/nudge.py): not for our children
            os.set_inheritable(fds[2], False)
            spec["nudge_fd"] = fds[2]
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in {null, out, err}:  # stdout and stderr may be one pipe
            if fd > 2:
                os.close(fd)
        sys.stdin = _stdio(0, "r")
        sys.stdout = _stdio(1, "w")
        sys.stderr = _stdio(2, "w")
        os.environ.update(spec.get("env", {}))
        from . import process

        code = process.run_forked(spec)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        _exit(code)


def _stdio(fd: int, mode: str) -> io.TextIOWrapper:
    """A standard stream on `fd`, written through line by line (as PYTHONUNBUFFERED
    made a spawned worker's): its output reaches the parent's pumps as it is written."""
    raw = io.FileIO(fd, mode, closefd=False)
    return io.TextIOWrapper(raw, line_buffering=True, write_through=True)


def _exit(code: int) -> None:
    """Leave without the interpreter's teardown (the parent's objects are not ours to
    finalise, and it costs tens of ms), after this process's own exit handlers."""
    import atexit

    try:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    finally:
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """`python -m stormish.local.forkserver --fd N`: a fork server started as a fresh
    interpreter (its parent has threads, so it could not fork one from itself)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "--fd":
        print("usage: python -m stormish.local.forkserver --fd N", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run stops us, not the terminal
    sock = socket.socket(fileno=int(args[1]))
    return serve(sock)


# -- the parent's end ------------------------------------------------------------------------


def describe_exit(code: int) -> str:
    """A process's exit status (a `Popen.returncode`) as a person reads it."""
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class ForkServer:
    """This process's end of a fork server (see the module's docstring)."""

    def __init__(self, preload: bytes | None = None, env: dict[str, str] | None = None) -> None:
        """`preload`: a cloudpickle whose modules a fresh server imports once (the
        topology); `env`: a fresh server's environment (its sys.path: PYTHONPATH)."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = mine
        self.forked = can_fork_here()
        if self.forked:
            self.pid = self._fork_from_here(mine, theirs)
            self._proc: subprocess.Popen | None = None
        else:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "stormish.local.forkserver", "--fd", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
                process_group=0,
            )
            self.pid = self._proc.pid
            theirs.close()
        self._status: int | None = None  # its exit status, once reaped (forked) or seen
        self._reaped = False  # forked from here: waited for (never a waitpid after)
        self._status_lock = threading.Lock()
        self._lock = threading.Lock()
        self._replies: queue.Queue[Any] = queue.Queue()
        self._exits: dict[int, int] = {}
        self._ended = threading.Condition()
        self.closed = False
        self._reader = threading.Thread(target=self._read, name="forkserver-reader", daemon=True)
        self._reader.start()
        if preload is not None and not self.forked:
            with self._lock:
                _send(self.sock, ("preload", preload))

    @staticmethod
    def _fork_from_here(mine: socket.socket, theirs: socket.socket) -> int:
        pid = os.fork()
        if pid == 0:  # the server: never returns
            code = 1
            try:
                mine.close()
                _after_fork()
                os.setpgid(0, 0)  # Ctrl-C at a terminal is for the run, which stops us
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                code = serve(theirs)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        theirs.close()
        return pid

    def _read(self) -> None:
        """The server's messages, until its socket ends; whatever ends this loop (an
        unreadable message too) marks the server gone, so that its workers count as
        lost and a fork waiting for an answer is told, rather than waiting for good."""
        try:
            while True:
                try:
                    got = _recv(self.sock)
                except OSError:
                    got = None
                if got is None:
                    break
                msg = got[0]
                if msg[0] == "exit":
                    with self._ended:
                        self._exits[msg[1]] = msg[2]
                        self._ended.notify_all()
                else:
                    self._replies.put(msg)
        finally:
            with self._ended:
                self.closed = True
                self._ended.notify_all()
            self._replies.put(("gone",))

    def fork(self, spec: dict[str, Any], stdout: int, stderr: int) -> Forked:
        """A worker forked with `spec` (`process.run_forked`), its stdout and stderr on
        these descriptors (the server and the worker get copies: close yours)."""
        got = self.fork_many([(spec, stdout, stderr)])[0]
        if isinstance(got, OSError):
            raise got
        return got

    def fork_many(self, requests: list[tuple[Any, ...]]) -> list[Forked | OSError]:
        """`fork` for several workers (each (spec, stdout, stderr[, the run's nudge pipe:
        runtime/nudge.py])), the requests sent before the first answer is awaited (a
        worker forked per round trip made -w 4 wait for four); each one's worker, or the
        error that says why it was not started. Raises when the server is gone before it
        answered them all."""
        with self._lock:
            if self.closed:
                raise OSError(f"the fork server (pid {self.pid}) is gone")
            for spec, *fds in requests:
                _send(self.sock, ("fork", spec), tuple(fds))
            replies = []
            for _ in requests:
                try:
                    replies.append(self._replies.get(timeout=START_TIMEOUT))
                except queue.Empty:
                    raise OSError(f"the fork server (pid {self.pid}) did not answer") from None
        out: list[Forked | OSError] = []
        for reply in replies:
            if reply[0] == "forked":
                out.append(Forked(self, reply[1]))
            elif reply[0] == "failed":
                why = f"the fork server (pid {self.pid}) could not start a worker: {reply[1]}"
                out.append(OSError(why))
            else:
                raise OSError(f"the fork server (pid {self.pid}) is gone")
        return out

    def signal(self, pid: int, signum: int) -> None:
        with self._lock:
            if not self.closed:
                try:
                    _send(self.sock, ("signal", pid, signum))
                except OSError:
                    pass

    def returncode(self, pid: int) -> int | None:
        with self._ended:
            return self._exits.get(pid)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        with self._ended:
            self._ended.wait_for(lambda: pid in self._exits or self.closed, timeout)
            return self._exits.get(pid)

    def ended_how(self) -> str:
        """How the server ended, once its socket closed without `close` (killed, say):
        what a worker's handle reports instead of a death of its own. Its exit status
        may come a moment after its socket closed (the kernel closes a dying process's
        files first): looked for up to a second."""
        with self._status_lock:
            deadline = time.monotonic() + 1.0
            while self._status is None and not self._reaped:
                self._status = self._exit_status()
                if self._status is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.01)  # the server is exiting: its status is a moment away
            status = self._status
        if status is None:
            return f"fork server (pid {self.pid}) closed its socket"
        how = describe_exit(status)
        return f"fork server (pid {self.pid}) {'was ' if status < 0 else ''}{how}"

    def _exit_status(self) -> int | None:
        """The server's exit status if it has ended (reaped here), else None."""
        if self._proc is not None:
            return self._proc.poll()
        try:
            pid, raw = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            self._reaped = True
            return None
        if not pid:
            return None
        self._reaped = True
        return os.waitstatus_to_exitcode(raw)

    def close(self) -> None:
        """End the server (after its workers ended: a live one notices and stops)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._reader.join(5)
        self.sock.close()
        if self._proc is not None:
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        else:
            with self._status_lock:
                if not self._reaped:  # not by `ended_how`: its status is kept for it
                    self._reaped = True
                    try:
                        self._status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
                    except ChildProcessError:
                        pass


class Forked:
    """A worker forked by a `ForkServer`, with the part of `subprocess.Popen` its owner
    uses (pid, poll, wait, kill, send_signal, returncode)."""

    stdin = None

    def __init__(self, server: ForkServer, pid: int):
        self.server = server
        self.pid = pid

    @property
    def returncode(self) -> int | None:
        return self.server.returncode(self.pid)

    def poll(self) -> int | None:
        code = self.server.returncode(self.pid)
        if code is None and self.server.closed:
            return -signal.SIGKILL  # its server is gone, and with it the worker
        return code

    def lost(self) -> str | None:
        """Why the worker counts as ended without an exit status of its own: its fork
        server is gone (it reaped the worker and reports it), None otherwise."""
        if self.server.returncode(self.pid) is None and self.server.closed:
            return f"its {self.server.ended_how()}"
        return None

    def wait(self, timeout: float | None = None) -> int:
        code = self.server.wait(self.pid, timeout)
        if code is None:
            if self.server.closed:
                return -signal.SIGKILL
            raise subprocess.TimeoutExpired(f"worker pid {self.pid}", timeout or 0.0)
        return code

    def send_signal(self, signum: int) -> None:
        if self.server.returncode(self.pid) is None:
            self.server.signal(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
