"""A word from a worker that the end of a finite run may be near: its spouts have all
finished (or ended their input).

Completion is found by polling the workers (local/running.py), and while they are busy
the polls back off to one every 50 ms, because each one wakes every worker. The last
such interval is pure wait for the user: a run whose spouts finished just after a look
ended up to 50 ms late (25 ms on average, on every `stormish run` and every test). A
byte on a pipe lets the run look at once instead: the worker writes it when its last
spout finishes, and the run's wait is a `select` on the read end, not a sleep.

One pipe per run, shared by its workers (in this process, forked or spawned: the write
end goes to each, never its number in argv or the environment). A write never blocks
and never fails the worker: a full or closed pipe means the run knows already or is gone.
"""

from __future__ import annotations

import os
import select
import threading
import time


class Nudge:
    """The run's end of the pipe (`wait`) and the end its workers write (`write_fd`)."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        # a wait and the close exclude each other: a closed descriptor's number is
        # soon another file's, which a late select would read from
        self._lock = threading.Lock()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s for a worker's word; True when one came (all read).
        Closed (the run is ending): a plain sleep, as a run without a pipe waits."""
        with self._lock:
            closed = self.read_fd < 0
            if not closed:
                return self._wait(timeout)
        time.sleep(max(0.0, timeout))
        return False

    def _wait(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.read_fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            while os.read(self.read_fd, 4096):
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        """From any thread: a wait under way is woken first, then both ends closed (the
        workers' copies stay theirs: a write to a pipe nobody reads fails, silently)."""
        tell(self.write_fd)
        with self._lock:
            for fd in (self.read_fd, self.write_fd):
                if fd >= 0:
                    os.close(fd)
            self.read_fd = self.write_fd = -1


def tell(fd: int | None) -> None:
    """A worker's word to its run (no-op without a pipe: a cluster's worker, a test's)."""
    if fd is None or fd < 0:
        return
    try:
        os.write(fd, b"!")
    except OSError:  # full (it has a word already) or closed (the run is over)
        pass
