"""The Kafka feed's thread with a scripted client (no broker): at_most_once commits each
polled batch before the spout can see it, and a batch whose commit failed is dropped
(at most once allows it lost, never processed twice)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from stormish.kafka.feed import Feed

pytestmark = pytest.mark.timeout(30)


class Scripted:
    """Assigns ("in", 0) at the first poll and hands two records once; commits as told."""

    def __init__(self, commit_ok: bool):
        self.commit_ok = commit_ok
        self.commits: list[dict] = []
        self.polled = threading.Event()
        self.sent = False

    def subscribe(self, topics: Any, pattern: Any, on_assign: Any, on_revoke: Any) -> None:
        self.on_assign = on_assign

    def committed(self, tps: Any) -> dict:
        return {tp: None for tp in tps}

    def poll(self, n: int, timeout: float) -> list:
        if not self.sent:
            self.sent = True
            self.on_assign([("in", 0)])
            return [("in", 0, 0, None, b"a", 0), ("in", 0, 1, None, b"b", 0)]
        self.polled.set()
        self.wait = threading.Event()
        self.wait.wait(timeout)  # as a consumer's poll waits for records that never come
        return []

    def commit(self, offsets: dict, sync: bool, metadata: str = "") -> bool:
        self.commits.append(dict(offsets))
        return self.commit_ok  # KafkaClient.commit answers False on a KafkaException

    def high_watermarks(self, tps: Any) -> dict:
        return {}

    def positions(self, tps: Any) -> dict:
        return {}

    def close(self) -> None:
        pass


@pytest.mark.parametrize("commit_ok", [True, False])
def test_at_most_once_hands_a_batch_only_once_it_is_committed(commit_ok: bool) -> None:
    client = Scripted(commit_ok)
    feed = Feed(lambda: client, ["in"], None, "earliest", "", commit_polled=True)
    feed.start()
    try:
        assert client.polled.wait(10), "the feed never polled again"
    finally:
        feed.close(None, 5)
    handed = [e for e in feed.inbox if e[0] == "records"]
    assert client.commits == [{("in", 0): 2}]
    assert len(handed) == (1 if commit_ok else 0)


def test_a_release_no_revoke_waits_for_is_not_kept() -> None:
    """The spout answers every revoke it hears of with a release; one for a revoke the
    feed did not wait on (the spout was deactivated) or gave up on (past
    revoke_timeout) was kept for good: a set that grew with every such rebalance."""
    feed = Feed(lambda: Scripted(True), ["in"], None, "earliest", "", revoke_timeout=0.01)
    feed.passive = True  # deactivated: the revoke does not wait
    feed._revoke([("in", 0)])
    feed.passive = False
    feed._revoke([("in", 1)])  # waited on, and given up after revoke_timeout
    for token in (1, 2):
        feed.commands.append(("released", token))
    feed._run_commands()
    assert feed._released == set()
