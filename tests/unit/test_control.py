"""The control channel's message shapes (pure functions): the safe format round-trips
what the channel carries, and nothing a peer sends is unpickled unless the verb takes
code and the receiver says its peer is authenticated."""

from __future__ import annotations

import os
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stormish.runtime.error_report import ErrorReport
from stormish.runtime.stats import TaskStats
from stormish.transport import control as ct
from stormish.transport import wire

keys = st.text() | st.integers() | st.tuples(st.integers(), st.text())
payloads = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
    | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.tuples(inner, inner)
    | st.dictionaries(keys, inner, max_size=4)
    | st.frozensets(st.integers(), max_size=4),
    max_leaves=12,
)  # fmt: skip
SAFE_VERBS = sorted(ct.VERBS - ct.CODE)


@given(st.sampled_from(SAFE_VERBS), st.integers(0, 2**64 - 1), payloads)
def test_requests_round_trip(verb, req_id, payload):
    assert ct.decode_request(ct.request(verb, req_id, payload)) == (verb, req_id, payload)


@given(st.booleans(), st.integers(0, 2**64 - 1), payloads)
def test_replies_round_trip(ok, req_id, payload):
    assert ct.decode_reply(ct.reply(req_id, payload, ok)) == (ok, req_id, payload)


def test_records_round_trip_as_their_own_classes():
    t = TaskStats(3, "split", 1, "bolt", last_errors=("x",), execute_histogram=(1, 2))
    e = ErrorReport("execute", "split", 3, "ValueError: x", "Split", "execute", "a.py", 7, 1.0)
    e.__dict__["trace"] = "Traceback ...\nValueError: x"
    back = wire.loads(wire.dumps({"tasks": [t], "errors": [e]}))
    assert back["tasks"] == [t] and isinstance(back["tasks"][0], TaskStats)
    assert back["errors"][0].headline == e.headline and back["errors"][0].trace == e.trace


def test_a_stuck_threads_stack_travels_as_its_text():
    import traceback

    stack = traceback.extract_stack(limit=2)
    e = ErrorReport(
        "stuck", "s", 1, "ExecutorStuck: x", "S", "execute", "a.py", 3, 1.0, None, stack
    )
    back = wire.loads(wire.dumps(e))
    assert back.stack is None and back.trace == e.trace and "has not returned" in back.trace


def test_code_travels_only_for_code_verbs_from_an_authenticated_peer():
    frames = ct.request("assign", 1, lambda x: x + 1)
    assert ct.decode_request(frames, code_ok=True)[2](1) == 2
    with pytest.raises(ct.ControlError, match="not authenticated"):
        ct.decode_request(frames)


class _Boom:
    """A pickle that, if ever loaded, leaves a file behind (what an attacker would run)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("verb", [b"list", b"hello", b"reboot", b"submit"])
def test_a_pickle_from_a_peer_never_runs(tmp_path, verb):
    """The attack of finding 1: a pickle in the payload frame of `list`, of an unknown
    verb, of the control port's `hello`, and a `submit` from an unauthenticated peer,
    in every frame layout. Whatever is refused, nothing ran."""
    ran = tmp_path / "ran"
    evil = pickle.dumps(_Boom(str(ran)))
    verbs = ct.VERBS | {"list", "submit"}
    for frames in ([verb, b"\0" * 8, evil], [verb, b"\0" * 8, b"null", evil]):
        try:
            ct.decode_request(frames, verbs)
        except ct.ControlError:
            pass
        try:
            ct.decode_reply([b"ok", b"\0" * 8, evil, evil])
        except ct.ControlError:
            pass
        ct.decode_reply([b"ok", b"\0" * 8, b"{}", evil])  # code frame dropped unread
    assert not os.path.exists(ran)


@pytest.mark.parametrize(
    "frames, why",
    [
        ([b"start", b"\0" * 8], "3 or 4 frames"),
        ([b"start", b"\0" * 7, b""], "8-byte id"),
        ([b"reboot", b"\0" * 8, b"null"], "unknown control verb 'reboot'"),
        ([b"start", b"\0" * 8, b"\x80not json"], "cannot be read"),
        ([b"start", b"\0" * 8, b"null", b"x"], "'start': the verb carries no code"),
        ([b"assign", b"\0" * 8, b"null"], "carries code in its fourth frame"),
        ([b"stats", b"\0" * 8, b'{"$r": "Popen", "v": {}}'], "unknown record 'Popen'"),
        ([b"stats", b"\0" * 8, b'{"$r": "TaskStats", "v": {"x": 1}}'], "unknown fields"),
    ],
)
def test_malformed_requests_are_named(frames, why):
    with pytest.raises(ct.ControlError, match=why):
        ct.decode_request(frames, code_ok=True)


def test_stop_results_travel_as_code_and_are_dropped_unread_by_an_unkeyed_receiver():
    frames = ct.answer("stop", 5, {"stuck": [], "results": {"sink": [(1, {3, 4})]}})
    assert len(frames) == 4 and b"results" not in frames[2]
    assert ct.decode_reply(frames, code_ok=True)[2]["results"] == {"sink": [(1, {3, 4})]}
    assert ct.decode_reply(frames)[2] == {"stuck": []}


def test_a_reply_status_must_be_ok_or_error():
    frames = ct.reply(3, None)
    frames[0] = b"maybe"
    with pytest.raises(ct.ControlError, match="ok or error"):
        ct.decode_reply(frames)


def test_unknown_verbs_are_refused_when_sending():
    with pytest.raises(ct.ControlError, match="unknown control verb"):
        ct.request("reboot", 1)


def test_a_payload_the_format_cannot_carry_is_named_when_sending():
    with pytest.raises(ct.ControlError, match="object is not a control payload shape"):
        ct.request("stats", 1, object())


def test_a_fresh_client_process_knows_the_records_nimbus_answers_with():
    """A client imports nothing of the runtime by itself: `stats` from nimbus failed
    with 'unknown record TaskStats' in a fresh process (the compose tests)."""
    import subprocess
    import sys

    code = (
        "from stormish.cluster.client import NimbusClient\n"
        "from stormish.transport import wire\n"
        'p = wire.loads(b\'{"$r":"TaskStats","v":{"task":1,"component":"a",'
        '"worker":0,"kind":"bolt"}}\')\n'
        "print(type(p).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "TaskStats", out.stderr


def test_a_frame_past_a_piece_travels_in_pieces_and_arrives_whole():
    """Every socket of the channel and of nimbus's API refuses a frame past `PIECE`
    (a stranger's announced 500 MiB was buffered before its handshake failed): a large
    topology, statistics or results cross in pieces, joined on arrival."""
    code = os.urandom(3 * ct.PIECE + 5)  # what a large topology's pickle holds
    frames = ct.request("assign", 7, code)
    assert max(len(f) for f in frames) <= ct.PIECE and len(frames) == 7
    assert ct.decode_request([bytes(f) for f in frames], code_ok=True) == ("assign", 7, code)
    stats = {"tasks": ["x" * 4096] * 600}  # a reply past a piece, in the safe format
    frames = ct.answer("stop", 9, {**stats, "results": {"sink": [(1, code)]}})
    assert max(len(f) for f in frames) <= ct.PIECE
    ok, rid, value = ct.decode_reply(frames, code_ok=True)
    assert (ok, rid, value.pop("results")) == (True, 9, {"sink": [(1, code)]})
    assert value == stats
    assert ct.decode_reply(frames) == (True, 9, stats)  # its code frame dropped unread
    small = ct.request("stats", 3, None)
    assert len(small[1]) == ct.ID.size  # what fits in a frame goes as before


@pytest.mark.parametrize(
    "table, frames, why",
    [
        (b"\0\0\0\x01" * 3, 3, "8-byte id"),  # counts for three frames: at most two follow
        (b"\0\0\0\x03", 2, r"piece counts \[3\] do not match its 2 frames"),
        (b"\0\0\0\x00\0\0\0\x01", 1, r"piece counts \[0, 1\]"),
        (b"\0\0\0", 1, "8-byte id"),
    ],
)
def test_pieces_that_do_not_match_their_table_are_named(table, frames, why):
    msg = [b"stats", b"\0" * 8 + table, *[b"null"] * frames]
    with pytest.raises(ct.ControlError, match=why):
        ct.decode_request(msg)
    with pytest.raises(ct.ControlError, match=why):
        ct.decode_reply([b"ok", *msg[1:]])
