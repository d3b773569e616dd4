"""The multilang tests' shared guard: no process they start outlives its test."""

from __future__ import annotations

import pytest

from stormish.testing import poll_for

from .procs import children


@pytest.fixture(autouse=True)
def no_child_left():
    yield
    try:  # a SIGKILL takes effect soon, not at once
        poll_for(lambda: not children(), timeout=5, interval=0.02, what="no child left")
    except TimeoutError:
        pytest.fail(f"a process a multilang test started outlived it: {children()}")
