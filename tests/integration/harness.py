"""Scaffolding the integration tests share: nothing left behind, and a cluster's
fixture teardown (its daemons stopped, their logs shown when a test failed, no process
of theirs left)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from .test_cluster import Cluster

LOGS = ("nimbus.log", "s0.log", "s1.log")


@contextmanager
def no_process_left() -> Iterator[None]:
    """Every process started inside is gone at the end: one left is killed and named."""
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    try:
        yield
    finally:  # a failing test's processes too (its own error is the one reported)
        left = [p for p in me.children(recursive=True) if p.pid not in before]
        for p in left:
            p.kill()
    assert not left, f"processes left running: {[p.pid for p in left]}"


@contextmanager
def running(make: Callable[[], Cluster], logs: tuple[str, ...] = LOGS) -> Iterator[Cluster]:
    """The cluster `make` starts, for a fixture to yield: closed at the end, its daemons'
    logs printed (pytest shows them when the test failed), and no process left."""
    with no_process_left():
        c = make()
        try:
            yield c
        finally:  # also when the test failed inside `with running(...)`
            c.close()
            for name in logs:
                print(f"--- {name}\n{c.log(name)[-3000:]}")
