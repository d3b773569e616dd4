"""ShellSpout: a spout whose work is done by a subprocess speaking Storm's multilang.

As Storm's ShellSpout (storm-client spout/ShellSpout.java): the commands `next`, `ack`,
`fail`, `activate` and `deactivate`, each with an `id` (`""` for next, activate and
deactivate), each ended by the child's `sync`; an emit with an `id` starts a tuple tree.

Storm's nextTuple blocks until the child's sync. Here `next_tuple` sends `next` when
none is outstanding and waits for its sync only a moment (`NEXT_WAIT`): a child that
takes longer (one that sleeps when it has nothing) does not hold the spout's loop, which
goes on draining acks and fails and hands the sync over when it comes. As in Storm, one
command is outstanding at a time: an ack or fail that comes meanwhile waits for the
sync (a sync names no command, and a child that answers out of order, storm.js whose
nextTuple answers from a timer, would have had an ack's sync taken for its `next`'s and
a second `next` sent while the first ran). Acks and fails of trees a previous child
emitted (before a restart) are not sent to the new one.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from ..component import Spout
from .child import Child
from .shell import ShellMixin

NEXT_WAIT = 0.002  # seconds next_tuple waits for its sync before it returns


class ShellSpout(ShellMixin, Spout):
    """Arguments as ShellBolt's."""

    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        self._sent: deque[str] = deque()  # the command awaiting its sync (one at most)
        self._queued: deque[tuple[str, Any]] = deque()  # commands behind it, in order
        self._next_out = False  # a `next` outstanding or queued
        # per message id the current child emitted: its trees not yet acked or failed
        # (Storm sends one ack per tree, and two emits may share an id); keyed by
        # `_key(id)`, as an id may be a JSON array or object
        self._live: dict[Any, int] = {}
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
        self._settle("ack", msg_id)

    def fail(self, msg_id: Any, failure: Any = None) -> None:
        """The child is told as Storm tells it (`fail`), final or not: the protocol has no
        word for a dead letter (`topology.max.replays`), and its spout decides."""
        self._settle("fail", msg_id)

    def _settle(self, command: str, msg_id: Any) -> None:
        """Tell the child of one tree of `msg_id`, unless a child that is gone emitted it
        (the new one never knew it). The original id goes back, array or not."""
        key = _key(msg_id)
        if key not in self._live:
            return
        child = self._wait_room()  # the child may be replaced meanwhile: look again
        left = self._live.get(key)
        if left is None:
            return
        if left == 1:
            del self._live[key]
        else:
            self._live[key] = left - 1
        self._send(child, command, msg_id)

    def activate(self) -> None:
        self._active = True
        self._command_out("activate", "")

    def deactivate(self) -> None:
        self._active = False
        self._command_out("deactivate", "")

    def close(self) -> None:
        self._stop_child()

    def _command_out(self, command: str, msg_id: Any) -> None:
        self._send(self._wait_room(), command, msg_id)

    def _send(self, child: Child, command: str, msg_id: Any) -> None:
        if self._sent:  # one command outstanding at a time (module doc)
            self._queued.append((command, msg_id))
            return
        child.last_read = time.monotonic()  # the wait for an answer starts now
        child.offer({"command": command, "id": msg_id})
        self._sent.append(command)

    def _send_queued(self) -> None:
        """The command queued behind the one whose sync just came."""
        child = self.child
        if self._queued and child is not None and not self._sent:
            command, msg_id = self._queued.popleft()
            self._send(child, command, msg_id)

    def _expecting(self) -> bool:
        return bool(self._sent)

    def _lost(self) -> None:
        self._sent.clear()
        self._queued.clear()  # acks and fails of the gone child's trees, activate: redone
        self._next_out = False
        self._live.clear()  # their trees complete or time out; the new child never knew them

    def _restarted(self) -> None:
        if self._active:
            self._command_out("activate", "")

    def _command(self, cmd: str, msg: dict) -> bool:
        if cmd == "sync":
            # One with no command outstanding is let pass: pystorm's raise_exception sends
            # `error` and a sync of its own before the command's. Storm's ShellSpout reads
            # only while a command is outstanding, so the next command takes that one.
            if self._sent and self._sent.popleft() == "next":
                self._next_out = False
            self._send_queued()
            return True
        if cmd == "emit":
            msg_id = msg.get("id")
            if msg_id is not None:
                live = self._live
                key = _key(msg_id)
                live[key] = live.get(key, 0) + 1
            self._emit(msg, None, msg_id)
            return self.child is not None
        return self._common(cmd, msg)


def _key(msg_id: Any) -> Any:
    """`msg_id` if it can be a dict key, else a key made from its JSON text (an id a
    child gives as a JSON array or object; a tuple, which no child's id can be)."""
    try:
        hash(msg_id)
    except TypeError:
        return ("json", json.dumps(msg_id, sort_keys=True, default=repr))
    return msg_id
