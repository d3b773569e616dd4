"""Per-batch locks of SparkCommitter: only one writer applies a batch at a time, and a
committer that starts recovers only the batches whose writer is gone.

A lock is `flock(LOCK_EX)` on a file `<state>/_staging/part-<sink>-<batch>.lock`, with
the holder's pid written in it (for people reading the directory). Staleness is the
kernel's business, not a pid check: a lock dies with its holder's file descriptor, so a
SIGKILLed task's locks are free at once, and a recycled pid can never make a dead
holder look alive. flock locks belong to an open file, not a process, so two committers
in one process (two tasks of a sink in one worker) exclude each other too.

The file is removed by its holder while still locked; whoever opened the old file and
then got the lock sees that the name no longer leads to it and tries again (the usual
flock-and-unlink dance). The state directory must be local (flock over NFS is not to be
trusted), which SparkCommitter already requires.
"""

from __future__ import annotations

import fcntl
import os


def acquire(path: str, wait: bool) -> int | None:
    """Lock `path` (created if missing); the descriptor to `release`, or None when `wait`
    is False and another holder has it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)  # its holder removed it while we waited: lock the new one


def release(path: str, fd: int) -> None:
    """Remove the lock file, then unlock (closing the descriptor)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)
