"""Batch settle: what a bolt's `execute_batch` returns, one result per tuple.

A bolt that sets `batch_size` (and optionally `batch_max_wait_ms`) gets its input in
batches the runtime forms for it, one lane's (or one upstream stream's) tuples in order,
and returns `list[Result]`: the result at position i settles tuple i. `ACK` completes
its part of the tree, `FAIL` fails the tree (the spout replays it), `DEAD_LETTER` gives
up on it for good: the tree is acked (never replayed) and the tuple is emitted on the
bolt's `__dead_letter` stream (`dead_letter_grouping("bolt")`) and counted. A list of the
wrong length settles what it matches and dead-letters the rest with reason
`batch_result_count`; returning None acks the whole batch; raising fails it.
"""

from __future__ import annotations

from enum import StrEnum


class Result(StrEnum):
    ACK = "ack"
    FAIL = "fail"
    DEAD_LETTER = "dead_letter"


ACK, FAIL, DEAD_LETTER = Result.ACK, Result.FAIL, Result.DEAD_LETTER
BATCH_RESULT_COUNT = "batch_result_count"
BATCH_RESULT_VALUE = "batch_result_value"
NO_SUBSCRIBER = "no_subscriber"  # an emit on a stream nobody subscribes to
OVERFLOW = "overflow"  # rejected by an edge's `fail` policy
