"""Row ids: a row's partition and its offset in it, packed in one int (the spout and the
drain both make them; neither needs the other for it)."""

from __future__ import annotations

PARTITION_SHIFT = 40  # 2^40 rows per partition, 2^23 partitions in a signed int64


def row_id(partition: int, offset: int) -> int:
    return (partition << PARTITION_SHIFT) | offset
