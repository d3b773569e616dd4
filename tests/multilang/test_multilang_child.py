"""One multilang child (stormish.multilang.child.Child) and its threads, with real
processes: whatever becomes of the child, its component hears of it (a Fault)."""

from __future__ import annotations

import os
import sys

import pytest

import stormish.multilang.child as child_mod
from stormish.multilang.child import Child, Fault
from stormish.testing import poll_for

from .procs import CHILDREN

pytestmark = pytest.mark.timeout(60)
PY = sys.executable


def fault_of(child: Child, timeout: float = 15) -> Fault:
    """The Fault the child's inbox ends with (messages before it are dropped)."""
    seen: list = []

    def ended():
        seen.extend(child.take())
        return seen and isinstance(seen[-1], Fault)

    poll_for(ended, timeout=timeout, interval=0.02, what="a Fault in the child's inbox")
    return seen[-1]


def script(body: str) -> list[str]:
    """A child running `body` (CHILDREN in its argv: the leak guard sees it)."""
    return [PY, "-c", body, str(CHILDREN)]


def test_a_child_that_exits_while_a_process_it_started_holds_its_stdout_is_a_fault():
    """The helper keeps the pipe open, so the reader never sees EOF, and the watchdog
    skipped a child that had exited: its task waited for ever with its tuples."""
    body = (
        "import os, subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]])\n"
        "sys.stderr.write('bye\\n'); sys.stderr.flush(); os._exit(3)\n"
    )
    child = Child(script(body), "json", "test", timeout=60)
    try:
        fault = fault_of(child)
        text = child.describe(fault.reason)
    finally:
        child.close()
    assert "still holds its stdout" in fault.reason
    assert "exit code 3" in text and "bye" in text


def test_a_child_stuck_in_the_middle_of_a_message_is_timed_out():
    """Each byte read refreshed the silence clock: a child writing half a message and
    then a blank now and then was never timed out."""
    body = (
        "import sys, time\n"
        "sys.stdout.write('{\"command\":'); sys.stdout.flush()\n"
        "while True:\n"
        "    sys.stdout.write(' '); sys.stdout.flush(); time.sleep(0.05)\n"
    )
    child = Child(script(body), "json", "test", timeout=1.0)
    try:
        fault = fault_of(child)
    finally:
        child.close()
    assert "sent nothing for" in fault.reason


def test_a_reader_that_fails_in_any_way_queues_a_fault(monkeypatch):
    """Only ProtocolError and OSError were caught: anything else ended the reader thread
    with no Fault, and the task hung."""

    class Broken:
        name = "json"
        encode = staticmethod(child_mod.framing("json").encode)

        def feed(self, data):
            raise RuntimeError("decoder bug")

    monkeypatch.setattr(child_mod, "framing", lambda name: Broken())
    child = Child(script("import sys; sys.stdout.write('x'); sys.stdout.flush(); input()"),
                  "json", "test", timeout=60)  # fmt: skip
    try:
        fault = fault_of(child)
    finally:
        child.close()
    assert "could not be read" in fault.reason and "decoder bug" in fault.reason


def test_a_path_in_env_is_appended_to_the_workers_as_storm_does(tmp_path):
    """Storm's ShellProcess appends an env PATH to the worker's; it replaced it, so
    `python3` or `node` was no longer found."""
    body = (
        "import json, os, sys\n"
        "sys.stdout.write(json.dumps({'path': os.environ['PATH'], 'x': os.environ['X']})"
        " + '\\nend\\n'); sys.stdout.flush(); input()\n"
    )
    child = Child(script(body), "json", "test", env={"PATH": str(tmp_path), "X": "1"})
    try:
        (msg,) = poll_for(child.take, timeout=15, what="the child's environment")
    finally:
        child.close()
    assert msg == {"path": os.environ["PATH"] + os.pathsep + str(tmp_path), "x": "1"}
