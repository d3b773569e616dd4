"""Pickling what users wrote (topologies, components) for executors and workers.

cloudpickle sends the classes of a topology file by value; since cloudpickle 3.1.3 it
rewrites the file name of every code object it sends that way to `<dynamic-code>` (a
deterministic payload), and a user's error in a worker then named no file: "in
Parse.execute at <dynamic-code>:7" where it said ".../rows.py:7", and the traceback
lost its source lines. Code objects go whole here, through marshal: the same
interpreter reads them on the other side (cloudpickle's own code format is tied to the
Python version just as much).
"""

from __future__ import annotations

import io
import marshal
import types
from typing import Any

import cloudpickle


class _Pickler(cloudpickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is types.CodeType:
            return marshal.loads, (marshal.dumps(obj),)
        return super().reducer_override(obj)


def dumps(obj: Any) -> bytes:
    """`cloudpickle.dumps`, with code objects (and so file names and lines) kept whole."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
    return buf.getvalue()
