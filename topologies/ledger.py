"""An account ledger: ordered lanes, batch settle and a dead-letter sink.

Transfers arrive for 200 accounts; each account's must be applied strictly in order (a
balance is a running sum), different accounts in parallel. `ordered_lanes` keeps every
account on one lane of one task, `max_in_flight` bounds what is being applied (the spout
waits beyond it), and the "apply" bolt settles each transfer in batches of 100: ACK when
applied, DEAD_LETTER when it would overdraw the account (it is never replayed; the
"rejected" bolt receives it on the dead-letter stream). The spout commits offsets only
below the first transfer not yet complete, as a Kafka consumer would.

Run: stormish run topologies/ledger.py
"""

import random

from stormish import ACK, DEAD_LETTER, BasicBolt, Bolt, Spout, Topology

ACCOUNTS = 200
TRANSFERS = 20_000


class Transfers(Spout):
    outputs = ["account", "offset", "amount"]

    def open(self, conf, context):
        rnd = random.Random(7)
        self.rows = [
            (f"acct{rnd.randrange(ACCOUNTS)}", i, rnd.choice((50, 20, -30, -60)))
            for i in range(TRANSFERS)
        ]
        self.next = 0
        self.pending = 0

    def next_tuple(self):
        for _ in range(100):
            if self.next >= len(self.rows):
                if not self.pending:
                    self.finish()
                return
            row = self.rows[self.next]
            self.track_offset(row[1])
            self.emit(row, msg_id=row[1])
            self.pending += 1
            self.next += 1

    def ack(self, offset):
        self.pending -= 1
        self.ack_offset(offset)

    def fail(self, offset, failure=None):
        self.pending -= 1
        self.emit(self.rows[offset], msg_id=offset)  # replayed
        self.pending += 1

    def result(self):
        return {"committed": self.committed_offset()}


class Apply(Bolt):
    batch_size = 100
    batch_max_wait_ms = 20

    def prepare(self, conf, context):
        self.balances = {}

    def execute_batch(self, batch):
        out = []
        for account, _offset, amount in batch.values:
            balance = self.balances.get(account, 0) + amount
            if balance < 0:
                out.append(DEAD_LETTER)  # would overdraw: rejected, not retried
                continue
            self.balances[account] = balance
            out.append(ACK)
        return out

    def result(self):
        return self.balances


class Rejected(BasicBolt):
    def prepare(self, conf, context):
        self.count = 0

    def execute(self, tup):
        self.count += 1

    def result(self):
        return self.count


topology = Topology("ledger")
topology.set_spout("transfers", Transfers())
topology.set_bolt("apply", Apply(), parallelism=2).ordered_lanes(
    "transfers", key=["account"], lanes=64, max_in_flight=1000
)
topology.set_bolt("rejected", Rejected()).dead_letter_grouping("apply")
