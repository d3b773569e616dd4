"""The Redis state store against a real redis-server (started by the test on 127.0.0.1,
stopped after): the same scenarios as the embedded store's (tests/unit/test_state_kv.py),
and a stateful word count with `topology.state.provider: redis` on 2 workers."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from redis_server import redis_server
from unit import test_state_kv as scenarios

from stormish import LocalCluster
from stormish.state.kv import KeyValueState

pytestmark = pytest.mark.timeout(60)
SCENARIOS = [
    getattr(scenarios, n)
    for n in dir(scenarios)
    if n.startswith("test_") and "make" in getattr(scenarios, n).__code__.co_varnames
]


@pytest.fixture(scope="module")
def redis_url():
    yield from redis_server()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_redis_store_scenarios(scenario, redis_url):
    from stormish.state.redis import RedisStore

    ns = f"t:{uuid.uuid4().hex}"
    opened = []

    def make():
        s = KeyValueState(RedisStore(redis_url, ns), ns)
        opened.append(s)
        return s

    try:
        scenario(make)
    finally:
        for s in opened:
            s.close()


def test_stateful_wordcount_on_redis_two_workers(redis_url):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "topologies"))
    import stateful_wordcount as wc

    topology = wc.topology
    conf = {"topology.state.provider": "redis", "topology.state.redis.url": redis_url}
    with LocalCluster(workers=2, config=conf) as c:
        c.submit(topology)
        c.wait_complete(topology.name, timeout=40)
        parts = c._get(topology.name).results()["count"]
    got: dict[str, int] = {}
    for part in parts:
        for w, n in part.items():
            got[w] = got.get(w, 0) + n
    assert got == wc.expected_counts(wc.Sentences().repeat)
    import redis

    client = redis.Redis.from_url(redis_url)
    assert list(client.scan_iter("stateful-wordcount:count-*"))
    client.close()
