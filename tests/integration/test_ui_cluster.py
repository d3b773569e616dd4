"""The REST API of a real nimbus (`--ui-port`) shows what `stormish list` shows and
takes Storm's kill and rebalance (found by a bug hunt)."""

from __future__ import annotations

import os

import pytest

from stormish import BasicBolt, Spout, Topology
from stormish.testing import poll_for

from .test_rest_api import entered, get, post

pytestmark = pytest.mark.timeout(240)


class Idle(Spout):
    """Emits nothing and never finishes: the topology runs until it is killed."""

    outputs = ["n"]

    def next_tuple(self):
        pass


class Sink(BasicBolt):
    def execute(self, tup):
        pass


def idle(name: str) -> Topology:
    t = Topology(name, config={"topology.workers": 2, "topology.message.timeout.secs": 3})
    t.set_spout("s", Idle())
    t.set_bolt("sink", Sink()).shuffle_grouping("s")
    return t


def test_nimbus_ui_shows_lists_status_and_takes_storms_rebalance_and_kill(ui_cluster):
    c = ui_cluster
    where = os.path.join(c.data, "ui-url")
    poll_for(lambda: os.path.exists(where), 30, 0.1, "nimbus's UI address")
    with open(where) as fh:
        api = entered(fh.read()) + "/api/v1"
    c.call("submit", (idle("calm"), {}))
    c.wait_status("calm", "running")

    def row() -> dict:
        (r,) = get(api + "/topology/summary")[1]["topologies"]
        return r

    assert (row()["status"], row()["active"]) == ("ACTIVE", True)
    # a deactivated topology is INACTIVE, as `stormish list` says (it said RUNNING)
    assert post(api + "/topology/calm/deactivate")[0] == 200
    assert (row()["status"], row()["active"]) == ("INACTIVE", False)
    assert get(api + "/topology/calm")[1]["status"] == "INACTIVE"
    assert post(api + "/topology/calm/activate")[0] == 200
    assert row()["status"] == "ACTIVE"
    # Storm's rebalance: the wait in the path, the workers in the body; none there (as
    # Storm's UI sends it): the workers it has, spread again; a bad number refused
    code, body = post(
        api + "/topology/calm/rebalance/1", body={"rebalanceOptions": {"numWorkers": 0}}
    )
    assert code == 400 and "numWorkers" in body["error"], body
    assert post(api + "/topology/calm/rebalance/5")[0] == 200
    assert row()["status"] == "REBALANCING"  # for the 5 s its spouts are off
    poll_for(
        lambda: (row()["status"], row()["workersTotal"]) == ("ACTIVE", 2), 60, 0.2, "2 workers"
    )
    code, _ = post(api + "/topology/calm/rebalance/1", body={"rebalanceOptions": {"numWorkers": 1}})
    assert code == 200
    poll_for(lambda: (row()["status"], row()["workersTotal"]) == ("ACTIVE", 1), 60, 0.2, "1 worker")
    # a kill's wait: KILLED, as Storm's (and not active) until a kill with no wait ends it
    assert post(api + "/topology/calm/kill/600")[0] == 200
    assert (row()["status"], row()["active"]) == ("KILLED", False)
    assert post(api + "/topology/calm/kill/0")[0] == 200
    c.wait_status("calm", "killed")
