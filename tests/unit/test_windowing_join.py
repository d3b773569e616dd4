"""JoinBolt's join, pure: Storm's TestJoinBolt scenarios on real stormish tuples, and the
builder's checks. (The bolt in a running topology: tests/integration/test_windowing.py.)"""

from __future__ import annotations

import pytest

from stormish.errors import TopologyError
from stormish.tuple import Source, Tuple
from stormish.windowing import Duration, JoinBolt
from stormish.windowing.join import FieldSelector, hash_join

USER_FIELDS = ("userId", "name", "city")
USERS = [
    (1, "roshan", "san jose"), (2, "harsha", "santa clara"), (3, "siva", "dublin"),
    (4, "hugo", "san mateo"), (5, "suresh", "sunnyvale"), (6, "guru", "palo alto"),
    (7, "arun", "bengaluru"), (8, "satish", "mumbai"), (9, "mani", "bengaluru"),
    (10, "priyank", "seattle"),
]  # fmt: skip
ORDER_FIELDS = ("orderId", "userId", "itemId", "price")
ORDERS = [
    (11, 2, 21, 7), (12, 2, 22, 3), (13, 3, 23, 4), (14, 4, 24, 5), (15, 5, 25, 2),
    (16, 6, 26, 7), (17, 6, 27, 4), (18, 7, 28, 2), (19, 8, 29, 9),
]  # fmt: skip
STORE_FIELDS = ("storeId", "storeName", "city")
STORES = [
    (1, "store1", "san jose"), (2, "store2", "santa clara"), (3, "store3", "dublin"),
    (4, "store4", "san mateo"), (5, "store5", "bengaluru"),
]  # fmt: skip
CITY_FIELDS = ("cityId", "cityName", "country")
CITIES = [
    (1, "san jose", "US"), (2, "santa clara", "US"), (3, "dublin", "US"),
    (4, "san mateo", "US"), (5, "sunnyvale", "US"), (6, "palo alto", "US"),
    (7, "bengaluru", "India"), (8, "mumbai", "India"), (9, "chennai", "India"),
]  # fmt: skip


def stream(name: str, fields, rows) -> list[Tuple]:
    src = Source("testSrc", 0, name, fields)
    return [Tuple(r, src) for r in rows]


def run(bolt: JoinBolt, *streams: list[Tuple]) -> list[list]:
    window = [t for s in streams for t in s]
    return [v for v, _ in hash_join(window, bolt.steps, bolt.selected, bolt._stream_of)]


def test_trivial():
    orders = stream("orders", ORDER_FIELDS, ORDERS)
    bolt = JoinBolt("orders", "orderId", selector="stream").select("orderId,userId,itemId,price")
    assert run(bolt, orders) == [list(o) for o in ORDERS]


def test_nested_keys():
    users = stream("users", ("outer",), [(dict(zip(USER_FIELDS, u, strict=True)),) for u in USERS])
    bolt = JoinBolt("users", "outer.userId", selector="stream").select("outer.name, outer.city")
    assert run(bolt, users) == [[u[1], u[2]] for u in USERS]


def test_projection_with_stream_names():
    users, stores = stream("users", USER_FIELDS, USERS), stream("stores", STORE_FIELDS, STORES)
    bolt = (
        JoinBolt("users", "city", selector="stream")
        .join("stores", "city", "users")
        .select("userId,name,storeName,users:city,stores:city")
    )
    rows = run(bolt, stores, users)
    assert len(rows) == len(STORES) + 1  # two users in bengaluru
    assert all(len(r) == 5 and None not in r for r in rows)
    assert [s.name for s in bolt.selected][3:] == ["users:city", "stores:city"]


def test_inner_join():
    users, orders = stream("users", USER_FIELDS, USERS), stream("orders", ORDER_FIELDS, ORDERS)
    bolt = (
        JoinBolt("users", "userId", selector="stream")
        .join("orders", "userId", "users")
        .select("userId,name,price")
    )
    rows = run(bolt, orders, users)
    assert len(rows) == len(ORDERS)
    assert rows[:2] == [[2, "harsha", 7], [2, "harsha", 3]]


def test_left_join_keeps_unmatched_users():
    users, orders = stream("users", USER_FIELDS, USERS), stream("orders", ORDER_FIELDS, ORDERS)
    bolt = (
        JoinBolt("users", "userId", selector="stream")
        .left_join("orders", "userId", "users")
        .select("userId,name,price")
    )
    rows = run(bolt, orders, users)
    assert len(rows) == 12
    assert [r for r in rows if r[2] is None] == [[1, "roshan", None], [9, "mani", None],
                                                 [10, "priyank", None]]  # fmt: skip


def test_three_streams():
    users = stream("users", USER_FIELDS, USERS)
    stores = stream("stores", STORE_FIELDS, STORES)
    cities = stream("cities", CITY_FIELDS, CITIES)
    sel = "name,storeName,city,country"

    inner = (JoinBolt("users", "city", selector="stream").join("stores", "city", "users")
             .join("cities", "cityName", "stores").select(sel))  # fmt: skip
    assert len(run(inner, users, stores, cities)) == 6
    left1 = (JoinBolt("users", "city", selector="stream").left_join("stores", "city", "users")
             .left_join("cities", "cityName", "users").select(sel))  # fmt: skip
    assert len(run(left1, users, cities, stores)) == len(USERS)
    left2 = (JoinBolt("users", "city", selector="stream").left_join("stores", "city", "users")
             .left_join("cities", "cityName", "stores").select(sel))  # fmt: skip
    assert len(run(left2, users, cities, stores)) == len(STORES) + 1
    mixed = (JoinBolt("users", "city", selector="stream").join("stores", "city", "users")
             .left_join("cities", "cityName", "users").select(sel))  # fmt: skip
    assert len(run(mixed, users, cities, stores)) == len(STORES) + 1


def test_join_by_source_component():
    users = [Tuple(u, Source("users", 1, "default", USER_FIELDS)) for u in USERS[:2]]
    orders = [Tuple(o, Source("orders", 2, "default", ORDER_FIELDS)) for o in ORDERS[:1]]
    bolt = JoinBolt("users", "userId").join("orders", "userId", "users").select("name,orderId")
    got = hash_join(users + orders, bolt.steps, bolt.selected, bolt._stream_of)
    assert got == [(["harsha", 11], [users[1], orders[0]])]  # anchored to what it joined


def test_builder_checks():
    with pytest.raises(TopologyError, match="not declared before"):
        JoinBolt("a", "k").join("b", "k", "c")
    with pytest.raises(TopologyError, match="already part"):
        JoinBolt("a", "k").join("b", "k", "a").join("b", "k", "a")
    with pytest.raises(TopologyError, match="twice"):
        JoinBolt("a", "k").select("x, a:y, x")
    with pytest.raises(TopologyError, match="no 'stream:' qualifier"):
        JoinBolt("a", "b:k")
    assert FieldSelector.parse(" s:a.b ") == FieldSelector("s", ("a", "b"), "s:a.b")
    bolt = JoinBolt("a", "k").select("k, v").with_tumbling_window(Duration(seconds=5))
    assert bolt.declared_streams() == {"default": ("k", "v")}
