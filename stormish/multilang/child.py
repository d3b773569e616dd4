"""One multilang subprocess: its pipes, and the three threads that keep it moving.

Storm's ShellProcess with a reader and a writer thread, and the heartbeat timer of
ShellBolt. The executor never blocks on the child's pipes:

- the **reader** thread reads the child's stdout in chunks, decodes them (framing.py)
  and puts the messages into a bounded inbox that the component drains on its own
  thread (`take`); when the inbox is full it stops reading, so a child that emits
  faster than its task can pass the tuples on is held back by its own stdout pipe;
  what comes while the component waits for the child (`wait`) is handed to it, and
  only what comes otherwise wakes the task's loop (`wake`): a wake-up for a message the
  component took itself would end the loop's next idle wait at once;
- the **writer** thread writes what the component offers (`offer`: tuples, spout
  commands, bounded by `capacity`) after the priority messages (`offer_now`: task ids,
  heartbeats), which Storm's ShellBoltMessageQueue sends first too;
- the **watchdog** thread sends a bolt's heartbeat every second, kills a child that
  said nothing for `timeout` seconds while something was expected of it, and ends one
  that exited while a process it started holds its stdout (the reader sees no EOF).

A child that exits, writes garbage or is killed leaves a `Fault` as the inbox's last
message; `describe` then tells why, with its exit code and the tail of its stderr.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .framing import ProtocolError, framing

log = logging.getLogger("stormish.multilang")
CHUNK = 1 << 16
STDERR_TAIL = 20  # lines of the child's stderr an error quotes
HEARTBEAT_SECONDS = 1.0  # Storm's ShellBolt heartbeat period
WRITE_BATCH = 64  # messages the writer joins into one write


class Fault:
    """The child is gone (exited, killed, or speaking something else): why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


class Child:
    """A started subprocess speaking multilang with `serializer` framing."""

    def __init__(
        self,
        command: Sequence[str],
        serializer: str,
        who: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        capacity: int = 100,
        inbox: int = 1024,
        wake: Callable[[], None] | None = None,
        heartbeat: Callable[[], Any] | None = None,
        expecting: Callable[[], bool] | None = None,
    ):
        self.command = list(command)
        self.who = who
        self.timeout = timeout
        self.capacity = capacity
        self.inbox_size = inbox
        self._framing = framing(serializer)
        self._encode = self._framing.encode
        self._wake = wake or (lambda: None)
        self._heartbeat = heartbeat
        self._expecting = expecting or (lambda: True)
        self.pid_dir = tempfile.mkdtemp(prefix="stormish-multilang-")
        full_env = child_env(os.environ, env)
        try:
            self.proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=full_env,
                start_new_session=True,  # its own process group: killed with its children
            )
        except OSError as exc:
            shutil.rmtree(self.pid_dir, ignore_errors=True)
            raise OSError(f"{who}: cannot start subprocess {self.command}: {exc}") from exc
        self.pid = self.proc.pid  # the child's own answer replaces it at the handshake
        self._stdin_fd = self.proc.stdin.fileno()  # type: ignore[union-attr]
        self._lock = threading.Condition()
        self._inbox: deque[Any] = deque()
        self._out: deque[bytes] = deque()  # tuples, commands: bounded by capacity
        self._now: deque[bytes] = deque()  # task ids, the handshake: first, unbounded
        # What each heartbeat proves once answered: the child reads in order and answers
        # a heartbeat after what it read before it, so its `sync` says the offered
        # messages written before that heartbeat are done (a bolt's emits for them came
        # first). Per heartbeat in write order: how many offered messages went before
        # it, and the byte offset of the stdin stream by which it was written.
        self._out_taken = 0  # offered messages taken by the writer, in order
        self._beats: deque[bytes] = deque()  # heartbeats not yet taken: before `_now`
        self.beat_marks: deque[tuple[int, int]] = deque()
        self._taken_bytes = 0  # bytes the writer took to write, in order
        self.written = 0  # bytes in the stdin pipe or read from it (after each write)
        self._ended = False  # the Fault is queued
        self.closed = False
        self.kill_reason: str | None = None
        self.last_read = time.monotonic()
        self.reader_held = False  # the inbox is full: a silence then is ours, not its
        self._waiting = False  # the component waits for a message or for room
        self._writer_idle = False  # the writer waits for something to write
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL)
        self._threads = [
            threading.Thread(target=self._read, name=f"{who} reader", daemon=True),
            threading.Thread(target=self._write, name=f"{who} writer", daemon=True),
            threading.Thread(target=self._stderr, name=f"{who} stderr", daemon=True),
            threading.Thread(target=self._watch, name=f"{who} watchdog", daemon=True),
        ]
        for t in self._threads:
            t.start()

    # -- the component's side (its executor's thread) -----------------------------------------
    def handshake(self, conf: Mapping[str, Any], context: Mapping[str, Any]) -> int:
        """Storm's first exchange: `{conf, pidDir, context}` out, `{"pid": N}` back."""
        self.offer_now({"conf": conf, "pidDir": self.pid_dir, "context": context})
        deadline = time.monotonic() + self.timeout
        while True:
            msgs = self.take()
            if msgs:
                first = msgs[0]
                if isinstance(first, dict) and isinstance(first.get("pid"), int):
                    with self._lock:  # whatever followed the pid is the component's
                        self._inbox.extendleft(reversed(msgs[1:]))
                    self.pid = first["pid"]
                    return self.pid
                if isinstance(first, Fault):
                    raise ProtocolError(self.describe(f"{first.reason}, during the handshake"))
                raise ProtocolError(self.describe(f"answered the handshake with {first!r}"))
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill("sent no pid within topology.subprocess.timeout.secs")
                left = 1.0
            self.wait(min(left, 0.1))

    def offer(self, msg: Any) -> bool:
        """Queue a message for the child unless `capacity` are waiting (then False)."""
        data = self._encode(msg)
        with self._lock:
            if len(self._out) >= self.capacity:
                return False
            self._out.append(data)
            if self._writer_idle:
                self._lock.notify_all()
        return True

    def offer_now(self, msg: Any) -> None:
        """Queue a message ahead of the offered ones (task ids, heartbeats)."""
        data = self._encode(msg)
        with self._lock:
            self._now.append(data)
            self._lock.notify_all()

    def beat(self) -> None:
        """Send a heartbeat (ahead of the offered messages, as Storm does)."""
        assert self._heartbeat is not None
        data = self._encode(self._heartbeat())
        with self._lock:
            self._beats.append(data)
            self._lock.notify_all()

    def synced(self) -> int | None:
        """The child sent a `sync`. If it is the answer to the oldest unanswered
        heartbeat: how many offered messages were written before that heartbeat (all of
        them done). None if none is outstanding, or if the child has not yet read that
        heartbeat out of its stdin pipe (so the sync answers none: pystorm's
        `raise_exception` sends one unprompted). The pipe says how much of what was
        written it still holds (FIONREAD, Linux; elsewhere the sync is believed)."""
        marks = self.beat_marks
        if not marks:
            return None
        written = self.written  # first: the pipe is read after, so never overcounted
        unread = _unread(self._stdin_fd)
        if unread is not None and written - unread < marks[0][1]:
            return None
        return marks.popleft()[0]

    def take(self) -> list[Any]:
        """Every message read so far (a `Fault` last, when the child is gone). Called
        every loop turn: no lock unless the reader waits for room (a deque's append
        and popleft are atomic)."""
        inbox = self._inbox
        if not inbox:
            return []
        pop = inbox.popleft
        msgs = [pop() for _ in range(len(inbox))]
        if self.reader_held:
            with self._lock:
                self._lock.notify_all()  # the reader may go on
        return msgs

    def wait(self, timeout: float) -> None:
        """Until a message comes, room frees up for `offer`, or `timeout`. The caller
        looks at the inbox after (`take`): what came meanwhile woke no one else."""
        with self._lock:
            self._waiting = True
            if not self._inbox:
                self._lock.wait(timeout)
            self._waiting = False

    def has_room(self) -> bool:
        return len(self._out) < self.capacity

    def kill(self, reason: str | None = None) -> None:
        """Kill the child and its process group (any thread); the reader then sees EOF."""
        if reason is not None and self.kill_reason is None:
            self.kill_reason = reason
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        """Kill, reap, stop the threads, remove the pid directory. Idempotent."""
        with self._lock:
            self.closed = True
            self._lock.notify_all()
        self.kill()
        try:
            self.proc.wait(5.0)
        except subprocess.TimeoutExpired:  # SIGKILL failed us: nothing more to try
            log.error("%s: subprocess %d did not die", self.who, self.proc.pid)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(2.0)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass
        shutil.rmtree(self.pid_dir, ignore_errors=True)

    def describe(self, reason: str) -> str:
        """`reason` with the command, pid, exit code and stderr tail (the error's text)."""
        code = self.proc.poll()
        if code is None:
            try:
                code = self.proc.wait(1.0)
            except subprocess.TimeoutExpired:
                code = None
        self._threads[2].join(1.0)  # the stderr tail is complete at EOF
        status = "still running" if code is None else f"exit code {code}"
        if code is not None and code < 0:
            status += f" (killed by signal {-code})"
        tail = "\n".join(self.stderr_tail) or "(empty)"
        return (
            f"{self.who}: subprocess {self.command} (pid {self.pid}) {reason}; {status}; "
            f"stderr tail:\n{tail}"
        )

    # -- threads ---------------------------------------------------------------------------
    def _read(self) -> None:
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        feed = self._framing.feed
        reason = "exited (its stdout closed)"
        try:
            while True:
                data = os.read(fd, CHUNK)
                if not data:
                    break
                msgs = feed(data)
                if msgs:  # a whole message, not a byte, is what says the child lives
                    self.last_read = time.monotonic()
                    if not self._put(msgs):
                        return  # closed
        except ProtocolError as exc:
            reason = f"wrote garbage: {exc}"
            self.kill(reason)
            if exc.messages:
                self._put(exc.messages)
        except OSError as exc:
            reason = f"stdout unreadable: {exc}"
        except Exception as exc:  # noqa: BLE001 - whatever it is, the task must hear of it
            reason = f"could not be read: {exc!r}"
            self.kill(reason)
        self._end(reason)

    def _end(self, reason: str) -> None:
        """Queue the Fault, the inbox's last message (once: reader or watchdog)."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            self._inbox.append(Fault(self.kill_reason or reason))
            self._lock.notify_all()
        self._wake()

    def _put(self, msgs: list[Any]) -> bool:
        if len(self._inbox) >= self.inbox_size:
            with self._lock:
                while len(self._inbox) >= self.inbox_size and not self.closed:
                    self.reader_held = True
                    self._lock.wait(0.5)
                self.reader_held = False
            self.last_read = time.monotonic()
        self._inbox.extend(msgs)
        if self._waiting:  # the component waits in `wait`: they are its, not the loop's
            with self._lock:
                self._lock.notify_all()
        else:
            self._wake()
        return not self.closed

    def _write(self) -> None:
        fd = self._stdin_fd
        while True:
            with self._lock:
                while not self._now and not self._beats and not self._out and not self.closed:
                    self._writer_idle = True
                    self._lock.wait()
                self._writer_idle = False
                if self.closed:
                    return
                if self._now or self._beats:
                    if self._beats:  # first: read by the mark's offset, so answerable
                        beats = b"".join(self._beats)
                        mark = (self._out_taken, self._taken_bytes + len(beats))
                        self.beat_marks.extend([mark] * len(self._beats))  # before the write
                        self._beats.clear()
                        self._now.appendleft(beats)
                    data = b"".join(self._now)
                    self._now.clear()
                    self._taken_bytes += len(data)
                else:
                    n = min(len(self._out), WRITE_BATCH)
                    data = b"".join([self._out.popleft() for _ in range(n)])
                    self._out_taken += n
                    self._taken_bytes += len(data)
                if self._waiting:
                    self._lock.notify_all()  # room for offer
            try:
                self._write_all(fd, data)
            except OSError:  # the child is gone: the reader reports it
                return

    def _write_all(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            self.written += n  # after the write: what the pipe holds or gave away
            view = view[n:]

    def _stderr(self) -> None:
        for raw in self.proc.stderr:  # type: ignore[union-attr]
            line = raw.decode(errors="replace").rstrip("\n")
            self.stderr_tail.append(line)
            log.warning("%s stderr: %s", self.who, line)

    def _watch(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self.closed, HEARTBEAT_SECONDS)
                if self.closed:
                    return
            if self.proc.poll() is not None:
                self._exited()
                return
            if self._heartbeat is not None:
                self.beat()
            silent = time.monotonic() - self.last_read
            if silent > self.timeout and not self.reader_held and self._expecting():
                self.kill(f"sent nothing for {silent:.1f}s (topology.subprocess.timeout.secs)")

    def _exited(self) -> None:
        """The child exited. Its reader sees EOF and reports it, unless a process it
        started still holds its stdout (a helper inherits it by default): then, a
        heartbeat later, its process group is killed and the Fault queued here."""
        reader = self._threads[0]
        reader.join(HEARTBEAT_SECONDS)
        while reader.is_alive() and self.reader_held and not self.closed:
            reader.join(HEARTBEAT_SECONDS)  # waiting for room, not for the pipe: not stuck
        if reader.is_alive() and not self.closed:
            self.kill("exited, but a process it started still holds its stdout open")
            self._end("exited")


def child_env(base: Mapping[str, str], env: Mapping[str, str] | None) -> dict[str, str]:
    """The worker's environment with `env` added, as Storm's ShellProcess builds it: a
    `PATH` in `env` is appended to the worker's (so `python3` is still found), every
    other key is set."""
    full = dict(base)
    for key, value in (env or {}).items():
        if key == "PATH" and full.get("PATH"):
            value = full["PATH"] + os.pathsep + value
        full[key] = value
    return full


def _unread(fd: int) -> int | None:
    """Bytes written to a pipe and not yet read from it (None where it cannot be told)."""
    try:
        buf = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except (OSError, ValueError):
        return None
    return int.from_bytes(buf, sys.byteorder, signed=True)
