"""ShellBolt: a bolt whose work is done by a subprocess speaking Storm's multilang.

As Storm's ShellBolt (storm-client task/ShellBolt.java): each input goes to the child
as `{id, comp, stream, task, tuple}` (ticks on `__tick` from task -1); the child answers
with `emit`, `ack`, `fail`, `log`, `error`, `metrics`, and `sync` to the heartbeats
(`__heartbeat`, task -1, comp null) sent every second. What the child holds is this
task's `inputs` until it acks or fails them; a child that dies fails them all.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from ..component import Bolt
from ..tuple import Tuple
from .shell import ShellMixin


class ShellBolt(ShellMixin, Bolt):
    """`command` runs the child (cwd: `cwd`, environment: this one plus `env`);
    `outputs` are the default stream's fields, `streams` maps stream names to fields
    (and wins); `serializer` is "json" (Storm's) or "msgpack" (pystorm's); `config` is
    per-component config (Flux's addComponentConfig)."""

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self.inputs: dict[str, Tuple] = {}
        self._ids = itertools.count(1)
        self._last = 0  # the last id offered; ids after `_base` are this child's, in order
        self._base = 0
        self._synced = 0  # this child's offered messages its answered heartbeats cover
        self._tick_secs = conf.get("topology.tick.tuple.freq.secs")
        self._start(conf, context, heartbeat=True)

    def execute(self, tup: Tuple) -> None:
        child = self.child
        if child is None or not child.has_room():
            child = self._wait_room()  # (and restarts a dead child)
        self._last = n = next(self._ids)
        tid = str(n)
        src = tup.source
        if tup.is_tick:  # Storm's tick tuple: from __system, task -1, [freq secs]
            msg = {"id": tid, "comp": "__system", "stream": "__tick", "task": -1,
                   "tuple": [self._tick_secs]}  # fmt: skip
        else:
            msg = {"id": tid, "comp": src.component, "stream": src.stream, "task": src.task,
                   "tuple": list(tup.values)}  # fmt: skip
        try:
            child.offer(msg)
        except (TypeError, ValueError, OverflowError) as exc:  # the tuple fails, once
            raise TypeError(
                f"{self._who}: a tuple from {src.component!r} stream {src.stream!r} cannot "
                f"be sent to the child as {self.serializer}: {exc}"
            ) from None
        self.inputs[tid] = tup  # the child answers only once this returns (same thread)

    def busy_outside(self) -> bool:
        """The child holds tuples it has neither acked nor failed, nor answered a
        heartbeat after (Child.synced): what it emits for them may still come. The
        completion rule asks (Worker.quiescence): execute returned when the tuple was
        handed over, so with acking off nothing else says the run is not over yet (a
        child taking 8 ms a tuple lost its last emits every run). A child that never
        acks (pystorm's auto_ack=False, storm.py's Bolt) is done with a tuple once it
        answered the next heartbeat (within a second); ticks never hold a run."""
        inputs = getattr(self, "inputs", None)
        if not inputs:
            return False
        covered = self._base + self._synced
        # from another thread: a copy in one C call, while the executor may change it
        return any(int(t) > covered and not tup.is_tick for t, tup in list(inputs.items()))

    def cleanup(self) -> None:
        self._stop_child()

    def _lost(self) -> None:
        held, self.inputs = self.inputs, {}
        for tup in held.values():
            self.fail(tup)

    def _restarted(self) -> None:
        self._base, self._synced = self._last, 0  # the new child counts from here
        self._after_error = False

    def _command(self, cmd: str, msg: dict) -> bool:
        if cmd == "emit":
            return self._emit_anchored(msg)
        if cmd == "ack" or cmd == "fail":
            try:
                tup = self.inputs.pop(msg.get("id"), None)  # type: ignore[arg-type]
            except TypeError:  # an id JSON gave as an array or object: never one of ours
                tup = None
            if tup is None:
                self._protocol(f"{cmd}ed a non-existent or already acked/failed id: {msg!r}")
                return False
            (self.ack if cmd == "ack" else self.fail)(tup)
            return True
        if cmd == "sync":  # a heartbeat's answer: what was written before it is done
            if self._after_error:  # pystorm's raise_exception: error, then a sync of its own
                self._after_error = False
                return True
            child = self.child
            covered = child.synced() if child is not None else None
            if covered is not None:
                self._synced = covered
            return True
        return self._common(cmd, msg)

    def _protocol_unknown(self, cmd: str, msg: dict) -> bool:
        return True  # Storm's ShellBolt ignores a command it does not know

    def _emit_anchored(self, msg: dict) -> bool:
        ids = msg.get("anchors")
        anchors = None
        if ids:
            if isinstance(ids, str):
                ids = [ids]
            inputs = self.inputs
            try:
                anchors = [inputs[i] for i in ids]
            except (KeyError, TypeError):
                self._protocol(f"anchored onto {ids!r} after ack/fail: {msg!r}")
                return False
        self._emit(msg, anchors)
        return self.child is not None
