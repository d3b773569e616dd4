"""A word from a worker that the end of a finite run may be near: its spouts have all
finished (or ended their input).

Completion is found by polling the workers (local/running.py), and while they are busy
the polls back off to one every 50 ms, because each one wakes every worker. The last
such interval is pure wait for the user: a run whose spouts finished just after a look
ended up to 50 ms late (25 ms on average, on every `stormish run` and every test). A
byte on a pipe lets the run look at once instead: the worker writes it when its last
spout finishes, and the run's wait is a `poll` of the read end, not a sleep.

One pipe per run, shared by its workers (in this process, forked or spawned: the write
end goes to each, never its number in argv or the environment). A write never blocks
and never fails the worker: a full or closed pipe means the run knows already or is gone.
"""

from __future__ import annotations

import math
import os
import select
import threading
import time


class Nudge:
    """The run's end of the pipe (`wait`) and the end its workers write (`write_fd`;
    `tell` for a worker in this process)."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        # a wait and the close exclude each other, as a write here and the close do: a
        # closed descriptor's number is soon another file's, which a late poll would
        # read from, or a late write write into (an executor the stop abandoned)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._poll = select.poll()  # not select: a descriptor past 1023 is fine
        self._poll.register(self.read_fd, select.POLLIN)

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s for a worker's word; True when one came (all read).
        Closed (the run is ending): a plain sleep, as a run without a pipe waits."""
        with self._lock:
            if self.read_fd >= 0:
                return self._wait(timeout)
        time.sleep(max(0.0, timeout))
        return False

    def _wait(self, timeout: float) -> bool:
        if not self._poll.poll(max(0, math.ceil(timeout * 1000))):
            return False
        try:
            while os.read(self.read_fd, 4096):
                pass
        except BlockingIOError:
            pass
        return True

    def tell(self) -> None:
        """A worker in this process has its spouts done (a no-op once closed)."""
        with self._write_lock:
            tell(self.write_fd)

    def close(self) -> None:
        """From any thread: a wait under way is woken first, then both ends closed (the
        worker processes' copies stay theirs: a write to a pipe nobody reads fails,
        silently)."""
        self.tell()
        with self._lock:
            if self.read_fd >= 0:
                os.close(self.read_fd)
                self.read_fd = -1
        with self._write_lock:
            if self.write_fd >= 0:
                os.close(self.write_fd)
                self.write_fd = -1


def tell(fd: int | None) -> None:
    """A worker process's word to its run, on its own copy of the write end (no-op
    without one: a cluster's worker)."""
    if fd is None or fd < 0:
        return
    try:
        os.write(fd, b"!")
    except OSError:  # full (it has a word already) or closed (the run is over)
        pass
