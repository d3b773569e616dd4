"""The control channel's message shapes (pure functions)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stormish.transport import control as ct

payloads = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(st.sampled_from(sorted(ct.VERBS)), st.integers(0, 2**64 - 1), payloads)
def test_requests_round_trip(verb, req_id, payload):
    assert ct.decode_request(ct.request(verb, req_id, payload)) == (verb, req_id, payload)


@given(st.booleans(), st.integers(0, 2**64 - 1), payloads)
def test_replies_round_trip(ok, req_id, payload):
    assert ct.decode_reply(ct.reply(req_id, payload, ok)) == (ok, req_id, payload)


def test_code_travels_in_payloads():
    fn = ct.decode_request(ct.request("assign", 1, lambda x: x + 1))[2]
    assert fn(1) == 2


@pytest.mark.parametrize(
    "frames, why",
    [
        ([b"start", b"\0" * 8], "3 frames"),
        ([b"start", b"\0" * 7, b""], "8-byte id"),
        ([b"reboot", b"\0" * 8, ct.request("ping", 0)[2]], "unknown control verb 'reboot'"),
        ([b"start", b"\0" * 8, b"not a pickle"], "cannot be unpickled"),
    ],
)
def test_malformed_requests_are_named(frames, why):
    with pytest.raises(ct.ControlError, match=why):
        ct.decode_request(frames)


def test_a_reply_status_must_be_ok_or_error():
    frames = ct.reply(3, None)
    frames[0] = b"maybe"
    with pytest.raises(ct.ControlError, match="ok or error"):
        ct.decode_reply(frames)


def test_unknown_verbs_are_refused_when_sending():
    with pytest.raises(ct.ControlError, match="unknown control verb"):
        ct.request("reboot", 1)
