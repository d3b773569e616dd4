"""`stormish rebalance` says before it acts when the topology cannot be placed at once."""

from __future__ import annotations

from stormish.cli_cluster import slots_short

SUPS = [{"id": "s0", "ports": [1, 2]}, {"id": "s1", "ports": [3, 4]}]


def row(name: str, slots: int, status: str = "running") -> dict:
    return {"name": name, "status": status, "slots": {str(i): f"s0:{i}" for i in range(slots)}}


def test_enough_slots_counting_its_own_says_nothing():
    assert slots_short("t", 4, [row("t", 2)], SUPS) is None
    assert slots_short("t", 2, [row("t", 2), row("u", 2)], SUPS) is None
    assert slots_short("t", 3, [row("t", 2), row("u", 2, "complete")], SUPS) is None


def test_too_few_free_slots_say_how_many_and_why():
    said = slots_short("t", 3, [row("t", 2), row("u", 2)], SUPS)
    assert said == (
        "topology 't': 3 workers wanted, but at most 2 worker slots can be free for it "
        "(4 offered by 2 supervisors, 2 held by other topologies): its workers stop now and "
        "it waits, starting, for 1 more"
    )
    one = slots_short("t", 2, [row("t", 1), row("u", 3)], SUPS[:1] + SUPS[1:])
    assert one is not None and "at most 1 worker slot can" in one


def test_an_unknown_or_ended_topology_is_left_to_nimbus_to_name():
    assert slots_short("ghost", 9, [row("t", 2)], SUPS) is None
    assert slots_short("t", 9, [row("t", 0, "killed")], SUPS) is None
