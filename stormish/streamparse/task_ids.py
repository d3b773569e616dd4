"""`emit(..., need_task_ids=True)`: the emit that also answers the tasks the tuple went
to, as Storm's multilang emit does. stormish's own emit answers nothing (the per-tuple
path pays for no list), so this one routes through the collector's parts itself: the
same route, the same picks (a shuffle's turn advances as an emit's would), the same
anchoring and tree records. Only the rare emit that asks for its task ids comes here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def emit_counted(
    emit_direct: Any,
    values: Sequence[Any],
    stream: str,
    anchors: list | None = None,
    msg_id: Any = None,
) -> list[int]:
    """Emit `values` on `stream` through the collector `emit_direct` is bound to;
    anchored to `anchors` (a bolt's) or starting a tree under `msg_id` (a spout's)."""
    col = emit_direct.__self__
    route = col._route(stream, values)
    obs = col._deliveries(route, values)
    reliable = getattr(col, "reliable", None)
    if msg_id is not None and reliable is not None:  # a reliable spout: a new tree
        root, xor = col.acks.new_root(), 0
        for ob in obs:
            edge = col.rand(63)
            xor ^= edge
            col._put(ob, values, ((root, edge),))
        reliable(root, msg_id, 1, values, stream)
        col.acks.init(root, xor)
    elif anchors and col.acking:
        anchor = col.acks.anchor
        for ob in obs:
            col._put(ob, values, anchor(anchors))
    else:
        col._put_all(obs, values, None)
        if msg_id is not None and hasattr(col, "acked_on_emit"):  # acking off
            col.acked_on_emit.append(msg_id)
    return [ob.task for ob in obs]
