"""Logging for the daemons and workers: stdlib `logging`, one format everywhere.

Every line says when, how bad, who (the daemon, or the worker and, inside a worker, the
component and task whose code was running) and what:

    2026-11-23 17:55:12.345 INFO  supervisor s0: worker wc/1 exited with code 3; restarting ...
    2026-11-23 17:55:12.351 ERROR worker wc/1 [split:3] stormish.executor: component ...

Inside a worker the executor being run is known per thread (`register`: the scheduler's
current executor, or the one a thread runs alone), read only when a record or a print
needs it, so log records and a bolt's `print` carry its component and task; `stormish
logs --component C` filters on that tag.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, BinaryIO, TextIO

# Who runs on a thread: thread id -> a function giving the "component:task" of the
# executor it runs now (None: none). Registered once per thread, read only when a record
# or a print needs it, so the scheduler's loop pays nothing per turn for it.
_owners: dict[int, Callable[[], str | None]] = {}

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-5s %(role)s%(where)s %(name)s: %(message)s"
DAEMON_FORMAT = "%(asctime)s.%(msecs)03d %(levelname)-5s %(message)s"
DATE = "%Y-%m-%d %H:%M:%S"


def register(who: Callable[[], str | None]) -> None:
    """This thread runs executors: `who()` names the one it runs now."""
    _owners[threading.get_ident()] = who


def unregister() -> None:
    _owners.pop(threading.get_ident(), None)


def set_running(tag: str | None) -> None:
    """This thread runs one executor (or none), named `component:task`."""
    if tag is None:
        unregister()
    else:
        register(lambda: tag)


def current_tag() -> str | None:
    who = _owners.get(threading.get_ident())
    return who() if who is not None else None


def _tag() -> str:
    tag = current_tag()
    return f" [{tag}]" if tag else ""


class _Context(logging.Filter):
    def __init__(self, role: str):
        super().__init__()
        self.role = role

    def filter(self, record: logging.LogRecord) -> bool:
        record.role = self.role
        record.where = _tag()
        return True


def level_of(name: str | int) -> int:
    if isinstance(name, int):
        return name
    value = logging.getLevelName(name.upper())
    if not isinstance(value, int):
        raise ValueError(f"log level {name!r}: one of {', '.join(LEVELS)}")
    return value


def configure(role: str, level: str | int = "INFO", stream: TextIO | None = None) -> None:
    """Log records of stormish (and the user's, via the root logger) as lines on
    `stream` (stderr) in the worker format, tagged with `role` ("worker wc/1")."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT, DATE))
    handler.addFilter(_Context(role))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level_of(level))


def configure_daemon(level: str | int = "INFO", stream: TextIO | None = None) -> None:
    """A daemon's lines: its messages already name it ("nimbus: ...")."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(logging.Formatter(DAEMON_FORMAT, DATE))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level_of(level))


class TaggedOutput(io.TextIOBase):
    """A worker's stdout/stderr: each line a component prints starts with its tag, so
    a bolt's `print` is found with the component's other lines."""

    def __init__(self, raw: TextIO):
        self.raw = raw
        self._at_start = True  # the raw stream's last write ended a line
        self._last: str | None = None  # the tag of the last write (None: untagged)
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        """What else a text stream has (`buffer`, `reconfigure`, `line_buffering`,
        `name`, ...) is the raw stream's: a bolt writing bytes to sys.stdout.buffer, or
        a module calling sys.stdout.reconfigure, failed with an AttributeError blamed on
        the user's line (bytes written so are not tagged)."""
        if name.startswith("__") or name in ("raw", "_at_start", "_last", "_lock"):
            raise AttributeError(name)
        return getattr(self.raw, name)

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):  # a text stream: click probes with b"" for a binary one
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        if not s:
            return 0
        tag = current_tag()
        with self._lock:
            if not self._at_start and tag != self._last:
                # another task's (or the summary's) line must not run on from a line
                # left open (a print with end=""): it starts on a line of its own
                self.raw.write("\n")
                self._at_start = True
            self._last = tag
            if tag is None:
                self.raw.write(s)
            else:
                prefix = f"[{tag}] "
                lines = s.split("\n")
                out = []
                for i, line in enumerate(lines):
                    start = self._at_start if i == 0 else True
                    out.append(prefix + line if start and line else line)
                self.raw.write("\n".join(out))
            self._at_start = s.endswith("\n")
        return len(s)

    def flush(self) -> None:
        self.raw.flush()

    def fileno(self) -> int:
        return self.raw.fileno()

    def isatty(self) -> bool:
        return self.raw.isatty()

    @property
    def encoding(self) -> Any:  # type: ignore[override]
        return getattr(self.raw, "encoding", "utf-8")


@contextmanager
def tagged_streams() -> Iterator[None]:
    """While it lasts, this process's stdout and stderr tag each line a component's
    code writes (`stormish run` with executors in this process: `-w 1`); lines of
    threads that run no component pass unchanged, so the summary is not touched."""
    out, err = sys.stdout, sys.stderr
    if not isinstance(out, TaggedOutput):
        sys.stdout = TaggedOutput(out)
    if not isinstance(err, TaggedOutput):
        sys.stderr = TaggedOutput(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def component_lines(text: str, component: str) -> list[str]:
    """The lines of a worker log that `component`'s code wrote (its tag), and the
    indented lines that follow one of them (a traceback)."""
    mark = f"[{component}:"
    out, inside = [], False
    for line in text.splitlines():
        if mark in line:
            inside = True
            out.append(line)
        elif inside and not _NEW_RECORD.match(line):
            out.append(line)  # the rest of a multi-line record (a traceback)
        else:
            inside = False
    return out


# a line that starts a record of its own: a timestamp, another tag, a start separator
_NEW_RECORD = re.compile(r"\d{4}-\d\d-\d\d |\[[^\]\s]+:\d+\] |=== ")


def worker_log_name(topology: str, index: int) -> str:
    """The file a worker's output goes to, in a supervisor's --log-dir and in `stormish
    run --log-dir` alike: one per topology and worker, across its restarts."""
    return f"{topology}-worker-{index}.log"


def start_line(topology: str, index: int, pid: int, details: str) -> bytes:
    """The separator written before each start of a worker in its log file (`stormish
    logs --component` ends a component's lines there)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"=== {stamp} worker {topology}/{index} started: pid {pid}, {details} ===\n".encode()


# A worker's log holds what its code prints and logs (data, tracebacks with values): only
# the user that runs it reads it, whatever the umask (not 0644 in 0755).
FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: str) -> str:
    """Make the log directory `path` (and its parents) if it is missing: made here, it is
    0700 whatever the umask (makedirs' mode is masked by the umask, so it is never wider
    on the way, and set exactly after). One that exists keeps its mode: it is the
    operator's, and may be shared (/tmp); the files stormish writes in it are 0600."""
    if not os.path.isdir(path):
        os.makedirs(path, mode=DIR_MODE, exist_ok=True)
        os.chmod(path, DIR_MODE)
    return path


def _open_private(path: str, truncate: bool = False) -> BinaryIO:
    """`path` for appending (or afresh), 0600 from its first byte; an older file of ours
    that was wider is narrowed."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else os.O_APPEND)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    with contextlib.suppress(OSError):  # not ours to change: it stays as it is
        os.fchmod(fd, FILE_MODE)
    return os.fdopen(fd, "wb" if truncate else "ab")


class RotatingFile:
    """A worker's log file, kept under `max_bytes` by rolling it to `path.1`, `path.2`,
    ... up to `backups` (Storm's worker.log rolling); written whole lines at a time.
    Every file it makes is 0600 (`FILE_MODE`)."""

    def __init__(self, path: str, max_bytes: int = 100 << 20, backups: int = 9):
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        self.f = _open_private(path)  # kept open while the worker writes
        self.size = self.f.seek(0, os.SEEK_END)

    def write(self, data: bytes) -> None:
        if self.max_bytes and self.size and self.size + len(data) > self.max_bytes:
            self.rotate()
        self.f.write(data)
        self.f.flush()
        self.size += len(data)

    def rotate(self) -> None:
        self.f.close()
        if self.backups > 0:
            for i in range(self.backups - 1, 0, -1):
                if os.path.exists(f"{self.path}.{i}"):
                    os.replace(f"{self.path}.{i}", f"{self.path}.{i + 1}")
            os.replace(self.path, f"{self.path}.1")
            self.f = _open_private(self.path)
        else:
            self.f = _open_private(self.path, truncate=True)
        self.size = 0

    def close(self) -> None:
        self.f.close()


def read_log(path: str, at: int | Sequence[int] | None, max_bytes: int) -> dict[str, Any]:
    """A piece of a log file for `stormish logs`: from `at` (None: its last `max_bytes`),
    whole lines, at most `max_bytes`. `next` is where the following read starts: the
    file's inode and an offset in it, so that a follower whose file was rolled since
    (`RotatingFile`: it is `path.1` now) first reads the rest of it there, then goes on
    in the new file from its start; a bare offset (older callers) past the end starts
    again at 0."""
    try:
        st = os.stat(path)
    except OSError:
        return {"data": "", "next": 0, "size": 0, "missing": True}
    if at is None:
        offset = max(0, st.st_size - max_bytes)
        return _read_piece(path, st.st_ino, offset, max_bytes, skip_partial=offset > 0)
    ino, offset = (None, at) if isinstance(at, int) else (at[0], at[1])
    if ino is not None and ino != st.st_ino:  # rolled since the last read
        rolled = f"{path}.1"
        try:
            same = os.stat(rolled).st_ino == ino
        except OSError:
            same = False
        if same:
            piece = _read_piece(rolled, ino, offset, max_bytes)
            if piece["data"]:
                return piece
        offset = 0  # the rest of the old file is read (or gone): on in the new one
    elif offset > st.st_size:
        offset = 0
    return _read_piece(path, st.st_ino, offset, max_bytes)


def _read_piece(
    path: str, ino: int, offset: int, max_bytes: int, skip_partial: bool = False
) -> dict[str, Any]:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(offset)
        data = f.read(max_bytes)
    if skip_partial and b"\n" in data:  # a tail starts at a whole line
        cut = data.index(b"\n") + 1
        data, offset = data[cut:], offset + cut
    if len(data) == max_bytes and b"\n" in data:  # stop at a whole line
        data = data[: data.rindex(b"\n") + 1]
    text = data.decode("utf-8", "replace")
    return {"data": text, "next": [ino, offset + len(data)], "size": size}
