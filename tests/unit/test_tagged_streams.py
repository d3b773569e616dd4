"""logs.tagged_streams and the status line: a component's print is tagged on the thread
that writes it, also when it goes above `stormish run`'s status line (a `-w 1` run's prints
were not tagged at all)."""

from __future__ import annotations

import io
import sys
import threading

import pytest

from stormish import logs, statusline


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def print_as(tag: str | None, text: str) -> None:
    def run() -> None:
        logs.set_running(tag)
        try:
            print(text)
        finally:
            logs.set_running(None)

    t = threading.Thread(target=run)
    t.start()
    t.join()


def test_tagged_streams_tag_a_components_lines_only(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with logs.tagged_streams():
        print_as("count:3", "hello\nworld")
        print_as(None, "summary")
    assert sys.stdout is out
    assert out.getvalue() == "[count:3] hello\n[count:3] world\nsummary\n"


@pytest.mark.parametrize("terminal", [True, False])
def test_a_tagged_print_stays_tagged_above_the_status_line(monkeypatch, terminal):
    term = Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stdout", term)
    with logs.tagged_streams():
        status = statusline.StatusLine(term)
        with statusline.shown(status) as s:
            s.show("wc: 10 tuples/s")
            print_as("split:2", "a word")
        assert sys.stdout.raw is term  # type: ignore[attr-defined]
    assert "[split:2] a word" in term.getvalue()


def test_a_tagged_stream_is_a_text_stream():
    with pytest.raises(TypeError):
        logs.TaggedOutput(io.StringIO()).write(b"")  # type: ignore[arg-type]
