"""ShellSpout: a spout whose work is done by a subprocess speaking Storm's multilang.

As Storm's ShellSpout (storm-client spout/ShellSpout.java): the commands `next`, `ack`,
`fail`, `activate` and `deactivate`, each with an `id` (`""` for next, activate and
deactivate), each ended by the child's `sync`; an emit with an `id` starts a tuple tree.

Storm's nextTuple blocks until the child's sync. Here `next_tuple` sends `next` when
none is outstanding and waits for its sync only a moment (`NEXT_WAIT`): a child that
takes longer (one that sleeps when it has nothing) does not hold the spout's loop, which
goes on draining acks and fails and hands the sync over when it comes. Acks and fails
of trees a previous child emitted (before a restart) are not sent to the new one.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from ..component import Spout
from .shell import ShellMixin

NEXT_WAIT = 0.002  # seconds next_tuple waits for its sync before it returns


class ShellSpout(ShellMixin, Spout):
    """Arguments as ShellBolt's."""

    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        self._sent: deque[str] = deque()  # commands awaiting their sync, in order
        self._next_out = False
        self._live: set[Any] = set()  # msg ids the current child emitted, not yet settled
        self._active = False
        self._start(conf, context, heartbeat=False)

    def next_tuple(self) -> None:
        if not self._next_out:
            self._command_out("next", "")
            self._next_out = True
        child = self.child
        deadline = time.monotonic() + NEXT_WAIT
        while self._next_out and child is not None:
            if not self.poll_outside():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                child.wait(left)
            child = self.child

    def ack(self, msg_id: Any) -> None:
        if msg_id in self._live:
            self._command_out("ack", msg_id)

    def fail(self, msg_id: Any, failure: Any = None) -> None:
        """The child is told as Storm tells it (`fail`), final or not: the protocol has no
        word for a dead letter (`topology.max.replays`), and its spout decides."""
        if msg_id in self._live:
            self._command_out("fail", msg_id)

    def activate(self) -> None:
        self._active = True
        self._command_out("activate", "")

    def deactivate(self) -> None:
        self._active = False
        self._command_out("deactivate", "")

    def close(self) -> None:
        self._stop_child()

    def _command_out(self, command: str, msg_id: Any) -> None:
        child = self._wait_room()  # the child may be replaced meanwhile
        if command == "ack" or command == "fail":
            if msg_id not in self._live:  # the tree of a child that is gone
                return
            self._live.discard(msg_id)
        if not self._sent:
            child.last_read = time.monotonic()  # the wait for an answer starts now
        child.offer({"command": command, "id": msg_id})
        self._sent.append(command)

    def _expecting(self) -> bool:
        return bool(self._sent)

    def _lost(self) -> None:
        self._sent.clear()
        self._next_out = False
        self._live.clear()  # their trees complete or time out; the new child never knew them

    def _restarted(self) -> None:
        if self._active:
            self._command_out("activate", "")

    def _command(self, cmd: str, msg: dict) -> bool:
        if cmd == "sync":
            if not self._sent:
                self._protocol(f"sent a sync with no command outstanding: {msg!r}")
                return False
            if self._sent.popleft() == "next":
                self._next_out = False
            return True
        if cmd == "emit":
            msg_id = msg.get("id")
            if msg_id is not None:
                self._live.add(msg_id)
            self._emit(msg, None, msg_id)
            return self.child is not None
        return self._common(cmd, msg)
