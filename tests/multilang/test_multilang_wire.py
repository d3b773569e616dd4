"""The multilang framings (sans I/O): what a child may write that Storm reads, and what
no child may write without the reader turning it into a ProtocolError."""

from __future__ import annotations

import json

import msgpack
import pytest

import stormish.multilang.framing as fr
from stormish.multilang.framing import JsonFraming, MsgpackFraming, ProtocolError

pytestmark = pytest.mark.timeout(60)


def test_crlf_line_ends_are_read_as_storms_readline_reads_them():
    """Storm's JsonSerializer reads lines with BufferedReader.readLine (`\\n`, `\\r\\n`):
    a child on Windows line ends, or one that writes them, hung for ever."""
    msgs = [{"command": "emit", "tuple": ["a"]}, {"command": "sync"}, [3, 4]]
    ends = [b"\r\nend\r\n", b"\nend\r\n", b"\r\nend\n"]
    wire = b"".join(json.dumps(m).encode() + eol for m, eol in zip(msgs, ends, strict=True))
    for cut in range(len(wire) + 1):
        f = JsonFraming()
        assert f.feed(wire[:cut]) + f.feed(wire[cut:]) == msgs


def test_a_line_that_only_starts_with_end_does_not_end_a_message():
    f = JsonFraming()
    with pytest.raises(ProtocolError, match="not a JSON message.*ending"):
        f.feed(b'{"command":\nending\nend\n')


def test_an_empty_message_is_an_error_at_the_start_too():
    for wire in (b"end\n", b"end\r\n", b'{"command": "sync"}\nend\nend\n'):
        with pytest.raises(ProtocolError, match="an empty message"):
            JsonFraming().feed(wire)


def test_json_too_deep_to_decode_is_garbage_not_a_dead_reader():
    """json.loads raises RecursionError, not ValueError: it killed the reader thread."""
    f = JsonFraming()
    with pytest.raises(ProtocolError, match="not a JSON message.*recursion") as caught:
        f.feed(b'{"command":"sync"}\nend\n' + b"[" * 100_000 + b"]" * 100_000 + b"\nend\n")
    assert caught.value.messages == [{"command": "sync"}]


def test_a_msgpack_message_over_the_limit_is_garbage_not_a_dead_reader(monkeypatch):
    """msgpack's Unpacker.feed raised BufferFull outside the try: the reader died."""
    monkeypatch.setattr(fr, "MAX_MESSAGE", 1000)
    f = MsgpackFraming()
    with pytest.raises(ProtocolError, match="over 1000 bytes"):
        for _ in range(10):
            f.feed(msgpack.packb(["x" * 5000])[:600])


def test_a_large_message_read_in_pieces_is_searched_once_not_once_a_piece():
    """Each read re-joined and re-split all that was pending: a 32 MiB message in 64 KiB
    reads took 8.8 s (quadratic). The search for `end` now starts where it stopped."""
    wire = JsonFraming.encode({"command": "emit", "tuple": ["x" * (4 << 20)]})
    f = JsonFraming()
    got = []
    for i in range(0, len(wire), 1 << 16):
        got += f.feed(wire[i : i + (1 << 16)])
    assert [len(m["tuple"][0]) for m in got] == [4 << 20]
    assert f.scanned < len(wire) + 8 * (len(wire) >> 16) + 16  # each byte once, give or take


def test_many_messages_in_one_read_and_a_remainder():
    msgs = [{"command": "ack", "id": str(i)} for i in range(1000)]
    wire = b"".join(JsonFraming.encode(m) for m in msgs)
    f = JsonFraming()
    assert f.feed(wire + b'{"command"') == msgs
    assert f.feed(b': "sync"}\r\nend\r\n') == [{"command": "sync"}]


@pytest.mark.parametrize("cls", ["ShellBolt", "ShellSpout"])
def test_a_string_for_a_streams_fields_is_refused_naming_the_fix(cls):
    """ShellBolt(cmd, "word") declared the fields w, o, r, d (found by a bug hunt)."""
    import stormish.multilang as ml

    shell = getattr(ml, cls)
    with pytest.raises(TypeError, match=rf"{cls} outputs: .* got the string 'word': write"):
        shell(["python3", "x.py"], "word")
    with pytest.raises(TypeError, match=rf"{cls} streams\['words'\]: .*'word'"):
        shell(["python3", "x.py"], streams={"words": "word"})
