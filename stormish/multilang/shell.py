"""What ShellBolt and ShellSpout share: the child's life, its faults and its commands.

The child runs while the task does. Everything it says is handled on the task's own
thread (`poll_outside`, which the executor calls each loop turn, and the component's
callbacks), so its emits, acks and fails take the executor's normal path (routing,
pendingEmitQ, backpressure) and user code never runs on two threads.

A fault (the child exited, wrote garbage, or was silent past
`topology.subprocess.timeout.secs`) kills and reaps the child, fails what it held, and
is an error whose text has the child's exit code and stderr tail. With
`topology.fail.fast` the task ends with it (the run stops); otherwise it is reported and
a new child is started, as Storm's supervisor would restart the worker.
"""

from __future__ import annotations

import atexit
import logging
import math
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import StormishError, TopologyError
from .child import Child, Fault
from .framing import SERIALIZERS, ProtocolError
from .handshake import conf_json, context_json

log = logging.getLogger("stormish.multilang")
RESTART_PAUSE = 1.0  # a child that died younger than this is restarted this much later
# Storm's multilang log levels: 0 trace, 1 debug, 2 info, 3 warn, 4 error
_LEVELS = {0: 5, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_LIVE: weakref.WeakSet[Child] = weakref.WeakSet()


class SubprocessError(StormishError):
    """A multilang child failed: its text has the command, exit code and stderr tail."""


class ShellError(StormishError):
    """A multilang child reported an error (its `error` command)."""


@atexit.register
def _kill_all() -> None:  # an interpreter exit never leaves a child behind
    for child in list(_LIVE):
        child.close()


def check_args(
    who: str, command: Sequence[str], serializer: str, env: Mapping[str, str] | None
) -> list[str]:
    if isinstance(command, str) or not command or not all(isinstance(c, str) for c in command):
        raise TypeError(f"{who}: command must be a non-empty list of strings, got {command!r}")
    if serializer not in SERIALIZERS:
        raise ValueError(f"{who}: serializer must be one of {SERIALIZERS}, got {serializer!r}")
    if env is not None and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise TypeError(f"{who}: env must map strings to strings")
    return list(command)


class ShellMixin:
    """The child's management, mixed into ShellBolt and ShellSpout."""

    command: list[str]
    serializer: str
    cwd: str | None
    env: dict[str, str] | None
    child: Child | None = None
    report_error: Any
    emit: Any
    emit_direct: Any
    emit_tasks: Any
    outputs: Any  # as Component declares them
    streams: Mapping[str, Any] | None
    component_config: Mapping[str, Any] | None
    _after_error: bool  # an `error` came, and no `sync` since (pystorm sends one after)

    def __init__(
        self,
        command: Sequence[str],
        outputs: Sequence[str] | None = None,
        streams: Mapping[str, Sequence[str]] | None = None,
        serializer: str = "json",
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        config: Mapping[str, Any] | None = None,
    ):
        self.command = check_args(type(self).__name__, command, serializer, env)
        name = type(self).__name__
        self.outputs = _fields(name, "outputs", outputs) if outputs is not None else None
        self.streams = (
            {str(k): _fields(name, f"streams[{k!r}]", v) for k, v in streams.items()}
            if streams
            else None
        )
        self.serializer = serializer
        self.cwd = cwd
        self.env = dict(env) if env else None
        # it waits for its child when the child is slow (backpressure): a thread of its
        # own under the cooperative scheduler, as Storm's ShellBolt has its own threads
        self.component_config = {"topology.executor.own.thread": True, **(config or {})}

    def _start(self, conf: Mapping[str, Any], context: Any, heartbeat: bool) -> None:
        self._conf, self._context = conf, context
        self._fail_fast = bool(conf.get("topology.fail.fast"))
        self._who = f"component {context.component_id!r} task {context.task_id}"
        self._log = logging.getLogger(f"stormish.multilang.{context.component_id}")
        self._hb = 0
        self._heartbeat = heartbeat
        self._after_error = False
        self.shell_metrics: dict[str, Any] = {}  # the child's `metrics` commands, by name
        self.restarts = 0
        self._spawn()

    def _spawn(self) -> None:
        conf, ctx = self._conf, self._context
        child = Child(
            self.command,
            self.serializer,
            self._who,
            cwd=self.cwd,
            env=self.env,
            timeout=float(conf["topology.subprocess.timeout.secs"]),
            capacity=int(conf["topology.shellbolt.max.pending"]),
            wake=ctx.wake,
            heartbeat=self._heartbeat_msg if self._heartbeat else None,
            expecting=self._expecting,
        )
        _LIVE.add(child)
        self.child = child
        self._born = time.monotonic()  # set before the handshake: a failed one counts
        try:
            child.handshake(conf_json(conf, ctx.topology_name), context_json(ctx))
        except Exception:
            child.close()
            raise

    def _heartbeat_msg(self) -> dict[str, Any]:
        self._hb += 1
        return {"id": f"hb{self._hb}", "comp": None, "stream": "__heartbeat", "task": -1,
                "tuple": []}  # fmt: skip

    def _expecting(self) -> bool:
        return True

    def _stop_child(self) -> None:
        child, self.child = self.child, None
        if child is not None:
            child.close()
            _LIVE.discard(child)

    # -- faults ---------------------------------------------------------------------------
    def _fault(self, reason: str) -> None:
        """The child is done for: kill, reap, fail what it held, report or raise, restart."""
        child = self.child
        assert child is not None
        text = child.describe(reason)
        self._stop_child()
        self._lost()
        err: Exception = SubprocessError(text)
        while True:
            if self._fail_fast:
                raise err
            self.report_error(err)
            young = RESTART_PAUSE - (time.monotonic() - self._born)
            if young > 0:  # a child that dies at once is not restarted in a tight loop
                time.sleep(young)
            self.restarts += 1
            try:
                self._spawn()
                break
            except (OSError, ProtocolError) as exc:  # the new one failed too: again
                err = SubprocessError(str(exc))
        self._restarted()

    def _lost(self) -> None:
        """Fail what the dead child held (the role's)."""

    def _restarted(self) -> None:
        """What a new child needs after a restart (the role's)."""

    # -- the child's messages ------------------------------------------------------------------
    def poll_outside(self) -> bool:
        """The executor's hook: handle what the child said since the last look."""
        child = self.child
        if child is None:
            return False
        msgs = child.take()
        if not msgs:
            return False
        self._handle(msgs)
        return True

    def _handle(self, msgs: list[Any]) -> None:
        """The messages of the current child, in order; once it is replaced (a fault,
        a broken protocol), the rest of what it said is dropped with it."""
        child = self.child
        for msg in msgs:
            if msg.__class__ is not dict:
                if isinstance(msg, Fault):
                    self._fault(msg.reason)
                    return
                self._protocol(f"sent {msg!r}, which is not a command")
                return
            try:
                cmd = msg["command"]
            except KeyError:
                self._protocol(f"sent a message with no command: {msg!r}")
                return
            if not self._command(cmd, msg) or self.child is not child:
                return

    def _protocol(self, what: str) -> None:
        child = self.child
        if child is not None:
            child.kill(what)
            self._fault(what)

    def _command(self, cmd: str, msg: dict) -> bool:
        """Handle one command; False when it broke the protocol (the child is replaced)."""
        raise NotImplementedError

    def _common(self, cmd: str, msg: dict) -> bool:
        if cmd == "log":
            # Storm takes a JSON number's intValue (3.0 and 3.7 are warn), else logs at INFO
            level = msg.get("level", 2)
            if level.__class__ is float:
                level = int(level) if math.isfinite(level) else 2
            level = _LEVELS.get(level, logging.INFO) if level.__class__ is int else logging.INFO
            self._log.log(level, "%s", msg.get("msg"))
        elif cmd == "error":
            self._after_error = True
            self.report_error(ShellError(f"Shell Process Exception: {msg.get('msg')}"))
        elif cmd == "metrics":
            name = msg.get("name")
            if not isinstance(name, str) or not name:
                self._protocol(f"sent metrics with no name: {msg!r}")
                return False
            self.shell_metrics[name] = msg.get("params")
        else:
            return self._protocol_unknown(cmd, msg)
        return True

    def _protocol_unknown(self, cmd: str, msg: dict) -> bool:
        self._protocol(f"sent an unknown command {cmd!r}: {msg!r}")
        return False

    def _wait_room(self) -> Child:
        """The child, once it has room for a message: while `topology.shellbolt.max.pending`
        wait, handle what the child says (it may be waiting for us to read)."""
        child = self.child
        while child is None or not child.has_room():
            if child is not None and not self.poll_outside():
                child.wait(0.05)
            child = self.child
        return child

    def _emit(self, msg: dict, anchors: Any, msg_id: Any = None) -> None:
        values = msg.get("tuple")
        if not isinstance(values, list):
            self._protocol(f"emitted {values!r}, which is not a list of values")
            return
        stream = msg.get("stream") or "default"
        task = msg.get("task")
        if task:
            self.emit_direct(task, values, stream, anchors=anchors, msg_id=msg_id)
        elif msg.get("need_task_ids", True):
            ids = self.emit_tasks(values, stream, anchors, msg_id)
            if self.child is not None:
                self.child.offer_now(ids)
        else:
            self.emit(values, stream, anchors=anchors, msg_id=msg_id)


def _fields(cls: str, what: str, fields: Any) -> list[str]:
    """A stream's field names (schema.field_names: a bare string "word" is refused), at
    construction: the shell keeps them as lists for its child's handshake."""
    from ..schema import field_names

    if isinstance(fields, str):
        try:
            field_names(fields)
        except TopologyError as exc:
            raise TypeError(f"{cls} {what}: {exc}") from None
    return list(fields)
