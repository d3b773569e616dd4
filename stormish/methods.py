"""The methods an author defines on a component, checked before a worker starts (their
signatures when the component is set, `set_spout`/`set_bolt`; the methods it must
define at submit), with the component, the class, the method, what stormish calls it
with and the file:line of the user's `def`.

Run instead, these mistakes failed in a worker with an error blamed on stormish's own
lines: `def execute(self)` as "Split.execute() takes 1 positional argument but 2 were
given (in .../per_tuple.py)", Storm's `open(self, conf, context, collector)` as a
missing 'collector' at spout_executor.py, a spout without `next_tuple` (`nextTuple`)
as the base class's NotImplementedError. Only what the user wrote is checked: a method
defined in stormish's package (ShellBolt, the streamparse adapters, connectors) is the
engine's to get right, and a signature that cannot be read (a builtin) is let be.
"""

from __future__ import annotations

import ast
import inspect
import logging
import textwrap
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .errors import TopologyError
from .sources import in_package

# What the engine calls, with which arguments after self. A spout's `fail` may take
# the Failure too (spout_executor._takes_reason): either form is right.
SPOUT_CALLS: Mapping[str, tuple[str, ...]] = {
    "open": ("conf", "context"),
    "next_tuple": (),
    "ack": ("msg_id",),
    "fail": ("msg_id",),
    "timeout_reset": ("msg_id",),
    "activate": (),
    "deactivate": (),
    "close": (),
}
BOLT_CALLS: Mapping[str, tuple[str, ...]] = {
    "prepare": ("conf", "context"),
    "execute": ("tup",),
    "execute_batch": ("batch",),
    "cleanup": (),
    "on_turn": (),
    "holds_work": (),
}
# a base class's own calls, by its name in stormish (found in the class's MRO: this
# module imports neither, so a topology without windows does not load them)
BASE_CALLS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "WindowedBolt": {"execute_window": ("window",)},
    "StatefulBolt": {"init_state": ("state",)},
}
# the collector's methods, bound on the task's copy: `return self.emit(...)` is an emit
_COLLECTOR = frozenset(
    {"emit", "emit_many", "emit_direct", "emit_tasks", "ack", "fail", "ack_batch"}
    | {"fail_batch", "reset_timeout", "report_error", "finish", "finish_input", "dead_letter"}
)

log = logging.getLogger("stormish.topology")
_WARNED: set[str] = set()


def check_methods(name: str, obj: Any, is_spout: bool) -> None:
    """Refuse a component with a method stormish calls defined with other arguments
    (when it is set: such a method is never right)."""
    check_not_generators(name, obj, is_spout)
    for method, args in _calls(obj, is_spout).items():
        _check_signature(name, obj, method, args)


def check_defined(name: str, obj: Any, is_spout: bool) -> None:
    """Refuse a component that leaves a method stormish needs (`next_tuple`, `execute`)
    to its base class, whose placeholder raises NotImplementedError. At submit, not when
    it is set: a sketch of a graph (`class Events(Spout): outputs = [...]`) may be built
    and read (docs, `stormish plan`) without being run."""
    calls = _calls(obj, is_spout)
    for method in _required(type(obj), _stormish_bases(type(obj)), is_spout):
        _refuse_missing(name, obj, method, calls[method])


def _calls(obj: Any, is_spout: bool) -> dict[str, tuple[str, ...]]:
    calls = dict(SPOUT_CALLS if is_spout else BOLT_CALLS)
    bases = _stormish_bases(type(obj))
    for base, extra in BASE_CALLS.items():
        if base in bases:
            calls.update(extra)
    return calls


def check_not_generators(name: str, obj: Any, is_spout: bool) -> None:
    """A `yield` (or `async def`) in execute or next_tuple makes a function whose body
    never runs when the engine calls it: plain Python users write `yield [w]` for an
    emit, and every tuple vanished while the run said "complete". Storm's void methods
    cannot make the mistake."""
    methods = ("next_tuple",) if is_spout else ("execute", "execute_batch")
    for method in methods:
        fn = getattr(type(obj), method, None)
        if fn is None:
            continue
        kind = (
            "a generator (it yields)"
            if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)
            else "a coroutine (async def)"
            if inspect.iscoroutinefunction(fn)
            else None
        )
        if kind is None:
            continue
        raise TopologyError(
            f"component {name!r}: {type(obj).__name__}.{method} is {kind}, so its body "
            f"never runs when the engine calls it: emit with self.emit([...]) instead of "
            f"yield or return{def_at(fn)}"
        )


def warn_returned_values(name: str, obj: Any, is_spout: bool) -> None:
    """A `return [word]` in execute or next_tuple (Bytewax's and Spark's way to emit) is
    ignored by the engine: said once, when the component is set, from the method's
    source. Nothing is checked per tuple; the topology runs as written."""
    method = "next_tuple" if is_spout else "execute"
    fn = _users(getattr(type(obj), method, None))
    if fn is None:
        return
    for line in _value_returns(fn):
        text = (
            f"component {name!r}: {type(obj).__name__}.{method} returns a value at "
            f"{line}, which stormish ignores: a return value is not emitted; emit with "
            "self.emit([...])"
        )
        if text not in _WARNED:
            _WARNED.add(text)
            log.warning("%s", text)


# -- signatures -------------------------------------------------------------------------
def _check_signature(name: str, obj: Any, method: str, args: tuple[str, ...]) -> None:
    raw = inspect.getattr_static(obj, method, None)
    bound = getattr(obj, method, None)
    if raw is None or bound is None or _users(raw) is None:
        return
    try:
        sig = inspect.signature(bound, follow_wrapped=False)  # what the engine calls
    except (TypeError, ValueError):
        return
    tries = [args, (*args, "failure")] if method == "fail" else [args]
    errors = []
    for given in tries:
        try:
            sig.bind(*given)
            return
        except TypeError as exc:
            errors.append(str(exc))
    wanted = " or ".join(f"{method}({', '.join(('self', *g))})" for g in tries)
    raise TopologyError(
        f"component {name!r}: {type(obj).__name__}.{method} is defined as "
        f"{method}{_shown(raw, sig)}, but stormish calls it as {wanted} ({errors[0]})"
        f"{_hint(method, sig, args)}{def_at(raw)}"
    )


def _shown(raw: Any, sig: inspect.Signature) -> str:
    """The signature as the user wrote it (with self), where it is a plain function."""
    if isinstance(raw, types.FunctionType):
        try:
            return str(inspect.signature(raw, follow_wrapped=False))
        except (TypeError, ValueError):
            pass
    return str(sig)


def _hint(method: str, sig: inspect.Signature, args: tuple[str, ...]) -> str:
    if method in ("open", "prepare") and len(sig.parameters) > len(args):
        return (
            f": Storm's {method}(conf, context, collector) has no collector here; emit, ack "
            "and fail are the component's own methods (self.emit([...]), self.ack(tup))"
        )
    return ""


# -- methods that must be defined -------------------------------------------------------
def _required(cls: type, bases: Mapping[str, type], is_spout: bool) -> Iterator[str]:
    """The methods stormish needs that `cls` leaves to its base's placeholder (which
    raises NotImplementedError at run time)."""

    def placeholder(method: str, base: str) -> bool:
        own = bases.get(base)
        return own is not None and getattr(cls, method, None) is vars(own).get(method)

    if is_spout:
        if placeholder("next_tuple", "Spout"):
            yield "next_tuple"
        return
    if placeholder("execute", "Bolt") and placeholder("execute_batch", "Bolt"):
        yield "execute"
    # a windowed bolt's execute (Storm's IWindowedBolt.execute) is said at submit by
    # WindowedBolt.check_in_topology, which names the rename
    if placeholder("execute_window", "WindowedBolt") and placeholder("execute", "WindowedBolt"):
        yield "execute_window"


def _refuse_missing(name: str, obj: Any, method: str, args: tuple[str, ...]) -> None:
    if method in vars(obj):  # set on the instance: the engine finds it there
        return
    cls = type(obj)
    own = _own_methods(cls)
    near = _near(method, list(own))
    if near is not None:
        said = f"; it defines {near}(), a misspelling? rename it{def_at(own[near])}"
    else:
        said = def_at(cls)
    raise TopologyError(
        f"component {name!r}: {cls.__name__} does not define {method}, which stormish "
        f"calls as {method}({', '.join(('self', *args))}){said}"
    )


def _own_methods(cls: type) -> dict[str, Any]:
    """The methods the user's classes of `cls` define (stormish's bases left out)."""
    out: dict[str, Any] = {}
    for c in reversed(cls.__mro__):
        if c is object or c.__module__.startswith("stormish."):
            continue
        out.update({k: v for k, v in vars(c).items() if callable(v) and not k.startswith("__")})
    return out


def _near(method: str, names: Sequence[str]) -> str | None:
    """`nextTuple`, `next_tupel`, `Execute`, `process` (streamparse's execute)."""
    flat = method.replace("_", "").lower()
    for n in names:
        if n.replace("_", "").lower() == flat or (method == "execute" and n == "process"):
            return n
    import difflib  # on the error path only: 2 ms of every command's start otherwise

    close = difflib.get_close_matches(method, names, n=1, cutoff=0.75)
    return close[0] if close else None


def _stormish_bases(cls: type) -> dict[str, type]:
    return {c.__name__: c for c in cls.__mro__ if c.__module__.startswith("stormish.")}


# -- returned values ----------------------------------------------------------------------
def _value_returns(fn: Callable[..., Any]) -> list[str]:
    """The file:line of each `return <value>` directly in `fn`'s body (not in a nested
    function, lambda or class); `return None` and `return self.emit(...)` (a collector
    call, which returns nothing) are not values."""
    try:
        lines, start = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return []
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return []
    return [f"{file}:{start + r.lineno - 1}" for r in _returns(node.body) if _a_value(r.value)]


def _returns(body: list[ast.stmt]) -> Iterator[ast.Return]:
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.Return):
            yield node
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            todo.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.Lambda))


def _a_value(v: ast.expr | None) -> bool:
    if v is None or (isinstance(v, ast.Constant) and v.value is None):
        return False
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute):
        owner = v.func.value
        if isinstance(owner, ast.Name) and owner.id == "self" and v.func.attr in _COLLECTOR:
            return False
        if isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "super":
            return False  # super().execute(tup): the base's, which returns nothing
    return True


# -- where --------------------------------------------------------------------------------
def _users(raw: Any) -> Any:
    """`raw` (a class attribute) when it is the user's code, None when stormish's own.
    What has no code of its own to tell (a callable object, a partial) is the user's."""
    fn = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
    code = getattr(fn, "__code__", None)
    if code is None:
        return raw if raw is not None else None
    return None if in_package(code.co_filename) else fn


def def_at(obj: Any) -> str:
    """ " (at FILE:LINE)" of a function's (or a class's) definition, "" when unknown."""
    fn = obj.__func__ if isinstance(obj, staticmethod | classmethod) else obj
    try:
        file, line = inspect.getsourcefile(fn), inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return ""
    return f" (at {file}:{line})" if file else ""
