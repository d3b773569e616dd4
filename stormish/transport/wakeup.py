"""A wake-up signal for one waiting consumer thread, cheaper than `threading.Event`.

`Event.set` and `Event.wait` run a `Condition` in Python code (a waiter lock allocated
per wait, a notify loop): a few microseconds per wake-up, paid on every small batch an
executor or the transfer thread is woken for. At moderate rates batches are small and
wake-ups are what a worker spends its CPU on. A bare lock used as a binary semaphore
does the same job in C: `set` releases it (the signal is up), `wait` acquires it (takes
the signal, or times out).

Rules it keeps: exactly one thread waits; any thread may set; a set before the wait is
not lost (the wait returns at once); several sets before one wait count as one.
"""

from __future__ import annotations

import os
import threading


class Wakeup:
    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()  # held = no signal

    def set(self) -> None:
        if self._lock.locked():
            try:
                self._lock.release()
            except RuntimeError:  # another thread set it first: signals do not add up
                pass

    def wait(self, timeout: float) -> bool:
        """True when woken by `set` (the signal is taken), False on timeout."""
        return self._lock.acquire(True, timeout if timeout > 0 else 0)

    def clear(self) -> None:
        self._lock.acquire(False)

    def is_set(self) -> bool:
        return not self._lock.locked()


class FdWakeup(Wakeup):
    """A `Wakeup` that a poller can also wait on, beside sockets.

    A worker whose scheduler thread also serves the ZeroMQ link (link.py, `serve`) parks
    in one `zmq.Poller` over the link's sockets and this descriptor: a publish into a
    local queue, a batch for another worker from a thread of its own, or new peers must
    end that wait as a received message does. The lock stays the signal (`is_set`, a
    non-blocking `wait`); the descriptor only wakes a poll. `set` writes it only when it
    raised the signal, so a busy worker makes no system call per publish.
    """

    __slots__ = ("fd", "_rfd")

    def __init__(self) -> None:
        super().__init__()
        if hasattr(os, "eventfd"):
            self.fd = self._rfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        else:  # not Linux: a pipe does the same
            self._rfd, self.fd = os.pipe()
            os.set_blocking(self._rfd, False)
            os.set_blocking(self.fd, False)

    def set(self) -> None:
        if self._lock.locked():
            try:
                self._lock.release()
            except RuntimeError:  # another thread set it first: that one writes
                return
            try:
                os.write(self.fd, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            except (BlockingIOError, OSError):  # already readable (or closed at exit)
                pass

    def readable_fd(self) -> int:
        return self._rfd

    def clear(self) -> None:
        self._lock.acquire(False)
        try:
            os.read(self._rfd, 64)
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        for fd in {self.fd, self._rfd}:
            try:
                os.close(fd)
            except OSError:
                pass
