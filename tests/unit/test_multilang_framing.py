"""stormish.multilang's pure parts: the wire framings and the handshake's groupings."""

from __future__ import annotations

import json

import msgpack
import pytest

from stormish.multilang.framing import JsonFraming, MsgpackFraming, ProtocolError, framing
from stormish.multilang.handshake import conf_json, grouping_json


def test_json_messages_end_with_an_end_line_and_may_arrive_in_any_pieces():
    wire = JsonFraming.encode({"command": "emit", "tuple": ["a"]}) + JsonFraming.encode([3, 4])
    assert wire.endswith(b"\nend\n")
    for cut in range(len(wire) + 1):
        f = JsonFraming()
        assert f.feed(wire[:cut]) + f.feed(wire[cut:]) == [
            {"command": "emit", "tuple": ["a"]},
            [3, 4],
        ]


def test_a_json_message_may_span_lines_as_storms_reader_joins_them():
    f = JsonFraming()
    assert f.feed(b'{"command":\n "sync"}\nend\n') == [{"command": "sync"}]


def test_garbage_is_an_error_quoting_it_and_keeping_the_good_messages_before_it():
    f = JsonFraming()
    with pytest.raises(ProtocolError, match="not a JSON message.*hello") as caught:
        f.feed(b'{"command": "ack", "id": "1"}\nend\nhello\nend\n{"command": "sync"}\nend\n')
    assert caught.value.messages == [{"command": "ack", "id": "1"}]


def test_a_message_that_never_ends_is_refused_before_memory_runs_out(monkeypatch):
    import stormish.multilang.framing as fr

    monkeypatch.setattr(fr, "MAX_MESSAGE", 1000)
    f = JsonFraming()
    with pytest.raises(ProtocolError, match="no `end` line"):
        for _ in range(100):
            f.feed(b"x" * 50 + b"\n")


def test_msgpack_is_pystorms_framing_back_to_back_objects():
    msgs = [{"pid": 12}, {"command": "emit", "tuple": ["é", 1, None]}, [7]]
    wire = b"".join(msgpack.packb(m) for m in msgs)
    assert MsgpackFraming().encode(msgs[0]) == msgpack.packb(msgs[0])
    for cut in range(len(wire) + 1):
        f = MsgpackFraming()
        assert f.feed(wire[:cut]) + f.feed(wire[cut:]) == msgs


def test_bad_msgpack_is_an_error():
    with pytest.raises(ProtocolError, match="not a msgpack message"):
        MsgpackFraming().feed(b"\xc1\xc1\xc1")


def test_an_unknown_serializer_is_named():
    with pytest.raises(ValueError, match="'xml'"):
        framing("xml")


@pytest.mark.parametrize(
    ("grouping", "fields", "storm"),
    [
        ("shuffle", (), {"type": "SHUFFLE"}),
        ("fields", ("word",), {"type": "FIELDS", "fields": ["word"]}),
        ("global", (), {"type": "FIELDS", "fields": []}),
        ("all", (), {"type": "ALL"}),
        ("none", (), {"type": "NONE"}),
        ("direct", (), {"type": "DIRECT"}),
        ("local_or_shuffle", (), {"type": "LOCAL_OR_SHUFFLE"}),
        ("partial_key", ("k",), {"type": "CUSTOM_SERIALIZED"}),
        ("custom", (), {"type": "CUSTOM_SERIALIZED"}),
    ],
)
def test_groupings_are_named_as_storms_thrift_grouping_fields(grouping, fields, storm):
    assert grouping_json(grouping, fields) == storm


def test_the_childs_conf_is_json_with_the_topology_name():
    conf = conf_json({"topology.workers": 2, "my.obj": object(), "my.list": [1, "a"]}, "wc")
    assert json.loads(json.dumps(conf))["topology.name"] == "wc"
    assert conf["my.list"] == [1, "a"] and conf["my.obj"].startswith("<object")
