"""The one-line status `stormish run` keeps at the bottom of a terminal.

Whatever else is printed (a bolt's `print`, a worker's log line) goes above it: the
status line is wiped, the line written, the status drawn again. Without this a print
landed after the status text, mid-line. Only on a terminal: piped output gets no
status line at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TextIO

CLEAR = "\r\033[K"


class StatusLine:
    def __init__(self, stream: TextIO):
        self.stream = stream
        self.text = ""
        self.lock = threading.RLock()

    def show(self, text: str) -> None:
        with self.lock:
            self.text = text
            self.stream.write(CLEAR + text)
            self.stream.flush()

    def above(self, write: Callable[[str], Any], data: str, flush: Callable[[], Any]) -> None:
        """`write(data)` above the status line (redrawn once `data` ends a line)."""
        with self.lock:
            if self.text:
                self.stream.write(CLEAR)
                self.stream.flush()
            write(data)
            flush()
            if self.text and data.endswith("\n"):
                self.stream.write(self.text)
                self.stream.flush()

    def end(self) -> None:
        """Leave the last status on its own line."""
        with self.lock:
            if self.text:
                self.stream.write("\n")
                self.stream.flush()
            self.text = ""


current: StatusLine | None = None  # the run's, while one is shown


def write_above(stream: TextIO, data: str) -> None:
    """Write `data` to `stream` above the status line when one is shown."""
    status = current
    if status is None:
        stream.write(data)
        stream.flush()
    else:
        status.above(stream.write, data, stream.flush)


class AboveStatus:
    """A stream (this process's stdout) whose writes go above the status line."""

    def __init__(self, raw: TextIO):
        self.raw = raw

    def write(self, data: str) -> int:
        write_above(self.raw, data)
        return len(data)

    def flush(self) -> None:
        self.raw.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)
