"""The UI's nimbus summary through a nimbus's `leader` answer (ClusterBackend): a
follower names itself "Not a Leader" and the leader it knows."""

from __future__ import annotations

from typing import Any

from stormish.ui.backend import ClusterBackend


class Answers:
    def __init__(self, leader: dict[str, Any]):
        self.address = "tcp://127.0.0.1:1"
        self.leader = leader

    def call(self, verb: str, payload: Any = None) -> Any:
        assert verb == "leader"
        return self.leader


def test_a_follower_names_itself_and_its_leader():
    got = {"id": "n1", "leading": False, "ha": True, "api": "tcp://h1:7000",
           "uptime_seconds": 12.5, "leader": {"id": "n0", "api": "tcp://h0:7000"}}  # fmt: skip
    back = ClusterBackend(Answers(got))  # type: ignore[arg-type]
    assert back.nimbuses() == [
        {"address": "tcp://h1:7000", "leader": False, "uptime_seconds": 12.5},
        {"address": "tcp://h0:7000", "leader": True, "uptime_seconds": None},
    ]


def test_a_single_nimbus_leads_at_the_address_asked():
    got = {"id": None, "leading": True, "leader": None, "ha": False, "uptime_seconds": 3.0}
    back = ClusterBackend(Answers(got))  # type: ignore[arg-type]
    assert back.nimbuses() == [
        {"address": "tcp://127.0.0.1:1", "leader": True, "uptime_seconds": 3.0}
    ]
