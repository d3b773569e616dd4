"""The live status `stormish run` keeps at the bottom of a terminal: rich's Live display,
a status line and a progress bar per spout that reports its progress (`progress()`:
SparkSpout(count=True), ListSpout, ...).

Whatever else is printed on the terminal (a bolt's `print`, a worker's output) goes
above it: rich wipes the display, prints the line and draws the display again. Without
this a print landed after the status text, mid-line. Writes to a stream that is not
the terminal (stdout piped to a file) go straight there: the display is not touched.
Only on a terminal: piped output gets no status line at all (the caller's choice).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.progress import TaskID

# (component, items done, total or None: unknown)
Progressed = tuple[str, int, int | None]


class StatusLine:
    def __init__(self, stream: TextIO):
        # rich is imported here, by the one run that draws on a terminal: importing it
        # costs ~30 ms, which every run with its output piped (and every worker process
        # of a run, which imports this module for `write_above`) would pay for nothing
        from rich.console import Console, Group
        from rich.live import Live
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        self._group, self._text = Group, Text
        self.console = Console(file=stream, highlight=False)
        self.text = Text()
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TimeRemainingColumn(),
            console=self.console,
            auto_refresh=False,
        )
        self.bars: dict[str, TaskID] = {}
        self.live = Live(
            console=self.console,
            get_renderable=self._renderable,
            auto_refresh=False,
            redirect_stdout=False,  # our streams go above it through `above`
            redirect_stderr=False,
        )
        self.shown = False
        self.lock = threading.RLock()
        self.partial: dict[int, str] = {}  # by id() of its stream: a line not ended

    def _renderable(self) -> RenderableType:
        return self._group(self.text, self.progress) if self.bars else self.text

    def show(self, text: str | None, progress: Iterable[Progressed] = ()) -> None:
        """Draw `text` (cut to the terminal's width; None: the last one) and a bar per
        spout in `progress`."""
        with self.lock:
            if text is not None:
                self.text = self._text(text, no_wrap=True, overflow="ellipsis")
            for name, done, total in progress:
                bar = self.bars.get(name)
                if bar is None:
                    self.bars[name] = self.progress.add_task(name, total=total, completed=done)
                else:
                    self.progress.update(bar, total=total, completed=done)
            if not self.shown:
                self.live.start()
                self.shown = True
            self.live.refresh()

    def above(self, stream: TextIO, data: str) -> None:
        """`data` for `stream`, above the display when `stream` is the terminal (whole
        lines: a line not ended waits for its end)."""
        with self.lock:
            if not self.shown or not _is_terminal(stream):
                stream.write(data)
                stream.flush()
                return
            *lines, rest = (self.partial.pop(id(stream), "") + data).split("\n")
            if rest:
                self.partial[id(stream)] = rest
            if lines:
                self.console.print(self._text.from_ansi("\n".join(lines)), soft_wrap=True)

    def end(self) -> None:
        """Leave the last status in place, on its own line(s)."""
        with self.lock:
            for rest in self.partial.values():
                self.console.print(self._text.from_ansi(rest), soft_wrap=True)
            self.partial.clear()
            if self.shown:
                self.live.stop()
            self.shown = False


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


current: StatusLine | None = None  # the run's, while one is shown


def write_above(stream: TextIO, data: str) -> None:
    """Write `data` to `stream` above the status line when one is shown."""
    status = current
    if status is None:
        stream.write(data)
        stream.flush()
    else:
        status.above(stream, data)


@contextmanager
def shown(status: StatusLine) -> Iterator[StatusLine]:
    """While `status` is shown: what this process writes to stdout and stderr (prints, a
    warning, a thread's traceback) and what the logging handlers on them write go above
    it; the last status stays in place after."""
    global current
    out, err = sys.stdout, sys.stderr
    swapped = [
        (h, h.stream)
        for h in logging.getLogger().handlers
        if isinstance(h, logging.StreamHandler) and h.stream in (out, err)
    ]
    for h, stream in swapped:
        h.setStream(AboveStatus(stream))
    sys.stdout, sys.stderr = _above(out), _above(err)
    current = status
    try:
        yield status
    finally:
        sys.stdout, sys.stderr = out, err
        for h, stream in swapped:
            h.setStream(stream)
        current = None
        status.end()


def _above(stream: Any) -> Any:
    """`stream` going above the status line; a stream that tags a component's lines
    (logs.TaggedOutput) still does: the tag is read on the writing thread, before the
    line is handed to the display."""
    from .logs import TaggedOutput

    if isinstance(stream, TaggedOutput):
        return TaggedOutput(AboveStatus(stream.raw))  # type: ignore[arg-type]
    return AboveStatus(stream)


class AboveStatus:
    """A stream (this process's stdout or stderr) whose writes go above the status line."""

    def __init__(self, raw: TextIO):
        self.raw = raw

    def write(self, data: str) -> int:
        write_above(self.raw, data)
        return len(data)

    def flush(self) -> None:
        self.raw.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)
