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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Unpicklable:
    """A module-level global that fails to pickle: `path` the functions that reach it
    (a method of the component's class first, the one that reads it last)."""

    path: tuple[types.FunctionType, ...]
    name: str
    value: Any
    error: Exception


def unpicklable_global(obj: Any) -> Unpicklable | None:
    """The first module-level global that the code of `obj`'s classes uses and that
    cannot be pickled, or None. cloudpickle sends a class defined in the topology file
    by value, with the globals its methods name; a `LOCK = threading.Lock()` there
    failed the whole component with only "cannot pickle '_thread.lock' object". A
    global that pickles (a number, a module or a function of an importable module: by
    reference) is fine; a function or class of the file's that fails is looked into
    for the global it fails on."""
    seen: set[int] = set()
    for cls in type(obj).__mro__:
        if _by_reference(cls):
            continue  # object, stormish's or an installed package's: its globals stay
        found = _in_class(cls, seen, ())
        if found is not None:
            return found
    return None


def _by_reference(cls: type) -> bool:
    """cloudpickle sends `cls` by name (its module is importable where it is read)."""
    rule = getattr(cloudpickle.cloudpickle, "_should_pickle_by_reference", None)
    if rule is None:  # not in this cloudpickle: look into every class
        return cls.__module__.startswith("stormish.")
    return bool(rule(cls))


def _in_class(cls: type, seen: set[int], path: tuple[Any, ...]) -> Unpicklable | None:
    seen.add(id(cls))
    for value in vars(cls).values():
        if isinstance(value, staticmethod | classmethod):
            value = value.__func__
        elif isinstance(value, property):
            value = value.fget
        if isinstance(value, types.FunctionType) and id(value) not in seen:
            found = _in_function(value, seen, path)
            if found is not None:
                return found
    return None


def _in_function(
    fn: types.FunctionType, seen: set[int], path: tuple[Any, ...]
) -> Unpicklable | None:
    seen.add(id(fn))
    path = (*path, fn)
    for name in sorted(_global_names(fn.__code__)):
        if name not in fn.__globals__ or id(fn.__globals__[name]) in seen:
            continue
        value = fn.__globals__[name]
        seen.add(id(value))
        try:
            dumps(value)
            continue
        except Exception as exc:  # noqa: BLE001 - any pickling failure is what is asked
            error = exc
        deeper = None
        if isinstance(value, types.FunctionType):
            deeper = _in_function(value, seen, path)
        elif isinstance(value, type):
            deeper = _in_class(value, seen, path)
        return deeper or Unpicklable(path, name, value, error)
    return None


def _global_names(code: types.CodeType) -> set[str]:
    """The names `code` and the functions nested in it may read as globals (as
    cloudpickle finds them: every name it loads that is not local)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names
