"""Components several integration tests share."""

from __future__ import annotations

from collections import Counter

from stormish import BasicBolt, Bolt, Spout


def sentences(vocabulary: int, stride: int, length: int, count: int) -> list[str]:
    words = [f"w{i}" for i in range(vocabulary)]
    return [
        " ".join(words[(i * stride + j) % vocabulary] for j in range(length)) for i in range(count)
    ]


class Split(BasicBolt):
    outputs = ["word"]

    def execute(self, tup):
        for w in tup.values[0].split():
            self.emit([w])


class Count(Bolt):
    """Counts words and acks; `result()` is the counts (no output)."""

    def prepare(self, conf, context):
        self.counts = Counter()

    def execute(self, tup):
        self.counts[tup.values[0]] += 1
        self.ack(tup)

    def result(self):
        return dict(self.counts)


class FailAll(Bolt):
    """Fails every tuple it takes (a downstream that refuses everything)."""

    def execute(self, tup):
        self.fail(tup)


class CountingSpout(Spout):
    """Emits 0..count-1 unreliably, `per_call` a call, then finishes."""

    outputs = ["n"]

    def __init__(self, count, per_call=100):
        self.count, self.per_call = count, per_call

    def open(self, conf, context):
        self.n = 0

    def next_tuple(self):
        if self.n >= self.count:
            self.finish()
            return
        for _ in range(self.per_call):
            self.emit([self.n])
            self.n += 1


def halt_lag_bound(row: tuple, conf_batch: int = 128, transfer: int = 50) -> int:
    """What can be past a backpressure flag when it lands, in tuples the size of `row`:
    the transfer queue (`transfer` batches of `conf_batch`), the peer's outbox (up to its
    hold mark, `transfer` batches, and one drained transfer queue more), the ZeroMQ
    queues on both sides (messages of at most MESSAGE_TUPLES tuples, or one batch) and
    the kernel buffers on both sides (Linux doubles what is asked). A receiving worker's
    scheduler reads its link between turns, and lends it to the link's threads only
    once a turn has run scheduler.LEND_AFTER: a fast upstream can fill all of it in
    that time, which then lands in the overflowQ at once."""
    from stormish.transport import frames as fr
    from stormish.transport import link as lk

    rows = [row] * 1000
    one = fr.encode_tuples(0, 0, [(2, 1, "default", rows, None)])
    per_tuple = len(one[1]) / 1000
    return int(
        3 * transfer * conf_batch
        + 2 * lk.HWM_MESSAGES * max(lk.MESSAGE_TUPLES, conf_batch)
        + 2 * 2 * lk.SOCKET_BUFFER_BYTES / per_tuple
    )
