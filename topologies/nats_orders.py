"""Orders from NATS JetStream -> per-customer ordered processing -> JetStream out.

    orders    JetStreamSpout: the durable consumer "balances" on stream ORDERS
              (subjects orders.<customer>; each message a JSON order {n, amount}, n
              counting that customer's orders from 1); finite: it stops at the end
              of the stream as it was when it started
      -> balance    a running balance per customer; ordered_lanes on the subject, so
                    each customer's orders are applied strictly in stream order (and
                    different customers in parallel); it counts an order that comes
                    out of order (none should)
      -> totals     JetStreamSink: {customer, n, balance} to totals.<customer> on stream
                    ORDER_TOTALS, each input acked on its PubAck
    after_run   reads ORDER_TOTALS back: each customer's last balance must be the sum
                of its orders

Run it against a local server (README, "NATS JetStream"):

    nats-server -js -sd /tmp/stormish-nats -a 127.0.0.1 -p 4222 &
    python topologies/nats_orders.py      # seeds the orders, runs, checks the totals

`python topologies/nats_orders.py` seeds ORDERS when the stream does not exist yet,
then runs the topology on a LocalCluster and calls `after_run`; `stormish run
topologies/nats_orders.py` runs it on streams seeded before (`--seed` seeds only).
Settings (environment): NATS_URL (default nats://127.0.0.1:4222), NATS_ORDERS (how
many orders to seed, default 20000), NATS_CUSTOMERS (default 50).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from stormish import Bolt, Topology
from stormish.nats import JetStreamSink, JetStreamSpout

URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
ORDERS = int(os.environ.get("NATS_ORDERS", "20000"))
CUSTOMERS = int(os.environ.get("NATS_CUSTOMERS", "50"))


class Balance(Bolt):
    """Applies each customer's orders in order; emits the running balance."""

    outputs = ["subject", "value"]

    def prepare(self, conf, context):
        self.balance: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.out_of_order = 0

    def execute(self, tup):
        customer = tup["subject"].rsplit(".", 1)[1]
        order = json.loads(tup["value"])
        if order["n"] != self.last.get(customer, 0) + 1:
            self.out_of_order += 1
        self.last[customer] = order["n"]
        total = self.balance[customer] = self.balance.get(customer, 0) + order["amount"]
        value = json.dumps({"customer": customer, "n": order["n"], "balance": total})
        self.emit([f"totals.{customer}", value.encode()], anchors=[tup])
        self.ack(tup)

    def cleanup(self):
        if self.out_of_order:
            print(f"balance: {self.out_of_order} orders came out of order (redeliveries)")


topology = Topology("nats-orders", config={"topology.workers": 1})
topology.set_spout(
    "orders", JetStreamSpout(URL, "ORDERS", "orders.>", "balances", stop_at_end=True)
)
topology.set_bolt("balance", Balance(), parallelism=2).ordered_lanes("orders", key=["subject"])
topology.set_bolt("totals", JetStreamSink(URL, subject_field="subject")).shuffle_grouping("balance")


def amount(i: int) -> int:
    return (i * 37) % 101 - 20  # deposits and withdrawals, deterministic


async def _seed() -> bool:
    """Create both streams and publish the orders, unless ORDERS exists already."""
    import nats
    from nats.js.errors import NotFoundError

    nc = await nats.connect(URL)
    js = nc.jetstream(publish_async_max_pending=10_000)
    try:
        try:
            await js.stream_info("ORDERS")
            return False
        except NotFoundError:
            pass
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        await js.add_stream(name="ORDER_TOTALS", subjects=["totals.>"])
        counts: dict[int, int] = {}
        for i in range(ORDERS):
            c = i % CUSTOMERS
            counts[c] = counts.get(c, 0) + 1
            order = {"n": counts[c], "amount": amount(i)}
            await js.publish_async(f"orders.c{c}", json.dumps(order).encode())
        await js.publish_async_completed()
        return True
    finally:
        await nc.close()


async def _totals() -> tuple[dict[str, int], dict[str, int]]:
    """The last balance per customer in ORDER_TOTALS, and the sums of ORDERS."""
    import nats

    nc = await nats.connect(URL)
    js = nc.jetstream()
    out: dict[str, dict[str, dict]] = {"ORDERS": {}, "ORDER_TOTALS": {}}
    expected: dict[str, int] = {}
    last: dict[str, tuple[int, int]] = {}
    for stream in out:
        n = (await js.stream_info(stream)).state.last_seq
        sub = await js.pull_subscribe(">", stream=stream)
        seen = 0
        while seen < n:
            for m in await sub.fetch(1000, timeout=5):
                seen += 1
                body = json.loads(m.data)
                if stream == "ORDERS":
                    c = m.subject.rsplit(".", 1)[1]
                    expected[c] = expected.get(c, 0) + body["amount"]
                elif body["n"] >= last.get(body["customer"], (0, 0))[0]:
                    last[body["customer"]] = (body["n"], body["balance"])
                await m.ack()
        await sub.unsubscribe()
    await nc.close()
    return expected, {c: b for c, (_, b) in last.items()}


def after_run(stats) -> None:
    expected, got = asyncio.run(_totals())
    wrong = sorted(c for c in expected if got.get(c) != expected[c])
    verdict = f"wrong for {wrong}" if wrong else "all correct"
    print(f"nats-orders: {len(expected)} customers, balances {verdict}")
    if wrong:
        raise SystemExit(1)


if __name__ == "__main__":
    seeded = asyncio.run(_seed())
    print(f"nats-orders: {'seeded' if seeded else 'using'} stream ORDERS at {URL}")
    if "--seed" in sys.argv[1:]:
        raise SystemExit(0)
    from stormish import LocalCluster

    with LocalCluster() as cluster:
        cluster.submit(topology)
        cluster.wait_complete(topology.name, timeout=600)
        stats = cluster.statistics(topology.name)
    after_run(stats)
