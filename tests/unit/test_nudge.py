"""The pipe a run's workers write when their spouts are done (runtime/nudge.py)."""

from __future__ import annotations

import os
import resource
import threading
import time

import pytest

from stormish.runtime.nudge import Nudge, tell


def test_a_word_is_seen_once_and_all_of_it_read():
    n = Nudge()
    try:
        assert n.wait(0) is False
        tell(n.write_fd)
        tell(n.write_fd)  # two workers: one wake, both words read
        assert n.wait(5) is True
        assert n.wait(0) is False
    finally:
        n.close()


def test_a_wait_under_way_is_woken_by_a_word_from_another_thread():
    n = Nudge()
    try:
        threading.Timer(0.05, tell, args=(n.write_fd,)).start()
        assert n.wait(30) is True  # without the word: False after 30 s
    finally:
        n.close()


def test_close_wakes_a_wait_and_a_closed_nudge_sleeps_rather_than_spins():
    n = Nudge()
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(n.wait(60)))
    waiter.start()
    deadline = time.monotonic() + 10
    while not n._lock.locked() and time.monotonic() < deadline:  # the wait has begun
        time.sleep(0.001)
    t0 = time.monotonic()
    n.close()  # not woken, it would wait out the waiter's 60 s for the lock
    assert time.monotonic() - t0 < 10
    waiter.join(10)
    assert not waiter.is_alive() and len(got) == 1
    t0 = time.monotonic()
    assert n.wait(0.05) is False  # closed: a sleep of the timeout, not a busy return
    assert time.monotonic() - t0 >= 0.04


def test_a_word_after_close_never_reaches_the_file_that_reused_the_number():
    """An executor the stop abandoned may finish its spout after the run closed the
    pipe: the numbers are soon another file's."""
    n = Nudge()
    n.close()
    r, w = os.pipe2(os.O_NONBLOCK)  # most likely the numbers the nudge had
    try:
        n.tell()
        try:
            assert os.read(r, 16) == b""
        except BlockingIOError:
            pass  # nothing written: as it should be
    finally:
        os.close(r)
        os.close(w)


def test_a_descriptor_past_1023_is_waited_on():
    """select() cannot take it (ValueError), and a run with many open files got one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard}: cannot open 1024 descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    held = []
    try:
        while not held or held[-1] < 1030:
            held.append(os.open(os.devnull, os.O_RDONLY))
        n = Nudge()
        try:
            assert n.read_fd >= 1024
            n.tell()
            assert n.wait(5) is True
            assert n.wait(0) is False
        finally:
            n.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_write_to_a_full_or_closed_pipe_never_raises():
    r, w = os.pipe2(os.O_NONBLOCK)
    try:
        while True:  # fill it
            try:
                os.write(w, b"x" * 65536)
            except BlockingIOError:
                break
        tell(w)  # full: the run has a word already
        os.close(r)
        tell(w)  # nobody reads: the run is over (EPIPE)
    finally:
        os.close(w)
    tell(None)
    tell(-1)
