"""Edges with a policy (stormish.edges), applied to what a bolt takes: the trees its
channels let go are failed, what a `fail` edge rejected is dead-lettered, arrivals are
counted, and a batch whose edge checks an age (lifespan_ms, deadline_ms; its rows come
as `StampedRows`) is judged: past the lifespan it is dropped and its trees failed, past
the deadline its tuples are marked late (`Source.late_twin`) and counted as missed.
"""

from __future__ import annotations

from typing import Any

from ...edges import STALE
from ...settle import OVERFLOW
from ..channel import StampedRows


class Screen:
    __slots__ = ("edges", "queue", "collector", "counts", "source")

    def __init__(self, edges: dict, queue: Any, collector: Any, counts: Any, source: Any):
        self.edges = edges  # (src_task, stream) -> (EdgeStats, the clock it stamps on)
        self.queue = queue
        self.collector = collector
        self.counts = counts
        self.source = source

    def lost(self) -> bool:
        """Fail the trees the channels let go, dead-letter what a `fail` edge rejected;
        whether there was any (what they emit is flushed this turn, work or not)."""
        q = self.queue
        if not q.chan_list:
            return False
        lost, rejected = q.take_lost()
        for metas, reason in lost:
            self.collector.acks.fail_lost(metas, reason)
        for src_task, stream, rows in rejected:
            comp = self.source(src_task, stream).component
            dead = self.collector.emit_dead_letter
            for v in rows:
                dead((None, stream, tuple(v), comp, OVERFLOW, 1))
            self.counts.dead_lettered += len(rows)
        return bool(lost or rejected)

    def arrived(self, batches: list, sign: int = 1) -> None:
        """Count a turn's batches: a block edge's as they leave the queue (a channel
        counts its own), executed now unless their age is judged as they execute."""
        edges = self.edges
        for b in batches:
            e = edges.get((b[0], b[1]))
            if e is not None:
                st = e[0]
                n = len(b[2]) * sign
                if not st.policy.channel:
                    st.arrived += n
                if b[2].__class__ is not StampedRows:
                    st.executed += n

    def returned(self, batches: list) -> None:
        """Batches taken and put back unexecuted (the bolt's emits parked: BoltExecutor):
        `arrived` undone, as they are counted again when they are taken again."""
        self.arrived(batches, -1)

    def unjudged(self, src_task: int, stream: str, k: int, late: bool) -> None:
        """`judge` counted k rows that were not executed after all (the rows before them
        parked emits): they go back and are judged again when they run."""
        st = self.edges[(src_task, stream)][0]
        st.executed -= k
        if late:
            st.deadline_missed -= k

    def judge(
        self, src_task: int, stream: str, values: Any, metas: Any, i: int = 0, j: int = -1
    ) -> bool | None:
        """Rows i:j (j=-1: to the end) of a batch whose edge checks an age, judged now.
        None: past lifespan_ms, rows i: are dropped (counted stale, their trees failed).
        Else whether they are past deadline_ms (counted missed); counted executed."""
        st, now = self.edges[(src_task, stream)]
        age = (now() - values.born) * 1000.0
        p = st.policy
        n = len(values)
        if p.lifespan_ms is not None and age > p.lifespan_ms:
            k = n - i
            st.dropped += k
            st.stale += k
            st.note(f"stale: {k} older than lifespan_ms={p.lifespan_ms:g} ({age:.0f} ms)", STALE)
            if metas is not None:
                self.collector.acks.fail_lost(metas[i:] if i else metas, STALE, src_task)
            self.counts.dropped_stale += k
            return None
        k = (n if j < 0 else j) - i
        late = p.deadline_ms is not None and age > p.deadline_ms
        if late:
            st.missed(k)
        st.executed += k
        return late
