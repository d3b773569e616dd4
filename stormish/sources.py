"""Where a frame's code comes from: stormish's own package or the user's files.

Errors point at the user's line, not stormish's: the error reports of running tasks
(runtime/error_report.py), an import of a topology file that raised (loader.py) and the
line that declared a subscription (topology.py) all skip the package's frames. An
editable install (the README's) lies in no library path, so the package is named by
its own directory."""

from __future__ import annotations

import os

PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def in_package(filename: str) -> bool:
    """The file is one of stormish's own."""
    return os.path.abspath(filename).startswith(PACKAGE)
