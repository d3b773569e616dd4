"""The wire format: round trips, zero-copy buffers, and exact errors on bad frames."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stormish.transport.frames import (
    HEADER,
    MAGIC,
    OOB_THRESHOLD,
    PACK_MIN_ROWS,
    VERSION,
    FrameError,
    Hello,
    Kind,
    Message,
    Packed,
    _may_hold_large_bytes,
    as_bulk,
    decode,
    encode_control,
    encode_hello,
    encode_status,
    encode_tuples,
    pack,
    unpack,
)
from stormish.transport.tracker import BackpressureStatus
from stormish.tuple import RejectedRows, StampedRows

u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)


def header(kind: int = Kind.CONTROL, version: int = VERSION, magic: bytes = MAGIC) -> bytes:
    return HEADER.pack(magic, version, kind, 1, 2)


def on_the_wire(frames: list) -> list[bytes]:
    """What a receiver gets: every frame as its own bytes."""
    return [bytes(f) for f in frames]


# ---- round trips -----------------------------------------------------------------------

large_bytes = st.builds(
    lambda n, b: bytes([b]) * n, st.integers(OOB_THRESHOLD, OOB_THRESHOLD + 9), st.integers(0, 255)
)
atoms = st.one_of(
    st.integers(), st.text(max_size=20), st.binary(max_size=40), st.none(), large_bytes
)
values = st.recursive(
    atoms, lambda inner: st.tuples(inner, inner) | st.lists(inner, max_size=3), max_leaves=6
)
rows = st.lists(st.tuples(values) | st.lists(values, max_size=3).map(tuple), max_size=5)


@st.composite
def batches(draw):
    out = []
    for _ in range(draw(st.integers(0, 3))):
        vals = draw(rows)
        metas = draw(st.none() | st.lists(st.integers(), min_size=len(vals), max_size=len(vals)))
        out.append((draw(u32), draw(u32), draw(st.text(max_size=10)), vals, metas))
    return out


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], max_examples=60)
@given(u32, u64, batches())
def test_tuple_batches_round_trip(sender, seq, sent):
    frames = encode_tuples(sender, seq, sent)
    assert decode(on_the_wire(frames)) == Message(Kind.TUPLES, sender, seq, sent)


def test_large_bytes_travel_out_of_band_and_arrive_without_a_copy():
    big, other = b"a" * OOB_THRESHOLD, b"b" * (OOB_THRESHOLD + 1)
    small = b"c" * (OOB_THRESHOLD - 1)
    frames = encode_tuples(1, 1, [(2, 3, "default", [(big, small), (other, big)], None)])
    assert len(frames) == 4  # header, pickle, `big` once, `other`
    assert len(frames[1]) < 2 * OOB_THRESHOLD
    wire = on_the_wire(frames)
    (_dest, _src, _stream, got, _metas) = decode(wire).body[0]
    assert got == [(big, small), (other, big)]
    assert got[0][0] is wire[2] and got[1][0] is wire[3] and got[1][1] is got[0][0]
    assert decode([memoryview(f) for f in wire]).body[0][3][1][0] == other


def test_large_strings_stay_in_band_without_the_slow_pass():
    frames = encode_tuples(1, 1, [(2, 3, "s", [("x" * OOB_THRESHOLD, "y" * OOB_THRESHOLD)], None)])
    assert len(frames) == 2
    assert not _may_hold_large_bytes(frames[1])
    assert _may_hold_large_bytes(pickle.dumps([b"z" * OOB_THRESHOLD], protocol=5))


def test_numpy_arrays_go_out_of_band_only_when_large():
    np = pytest.importorskip("numpy")  # numpy is optional: only the spark extra needs it
    big, small = np.arange(OOB_THRESHOLD // 8, dtype=np.int64), np.arange(10)
    frames = encode_tuples(1, 1, [(2, 3, "s", [(big, small)], [7])])
    assert len(frames) == 3
    (row,) = decode(on_the_wire(frames)).body[0][3]
    np.testing.assert_array_equal(row[0], big)
    np.testing.assert_array_equal(row[1], small)


def test_numpy_buffers_and_large_bytes_keep_their_order():
    np = pytest.importorskip("numpy")  # numpy is optional: only the spark extra needs it
    arrays = [np.full(OOB_THRESHOLD, i, dtype=np.uint8) for i in range(3)]
    blobs = [bytes([i]) * OOB_THRESHOLD for i in range(3)]
    rows = [(arrays[0], blobs[0]), (blobs[1], arrays[1], blobs[2]), (arrays[2],)]
    frames = encode_tuples(1, 1, [(2, 3, "s", rows, None)])
    assert len(frames) == 2 + 6
    got = decode(on_the_wire(frames)).body[0][3]
    assert [len(row) for row in got] == [2, 3, 1]
    np.testing.assert_array_equal(got[1][1], arrays[1])
    assert (got[0][1], got[1][0], got[1][2]) == tuple(blobs)
    np.testing.assert_array_equal(got[2][0], arrays[2])


def test_batches_may_be_given_as_lists_and_arrive_as_tuples():
    frames = encode_tuples(1, 1, [[2, 3, "s", [(1,)], None]])
    assert decode(frames).body == [(2, 3, "s", [(1,)], None)]


@given(u32, u64, u64, st.frozensets(u32, max_size=50), st.frozensets(u32, max_size=50))
def test_status_round_trips(sender, seq, status_id, bp, free):
    status = BackpressureStatus(sender, status_id, bp, free - bp)
    assert decode(encode_status(sender, seq, status)) == Message(
        Kind.BP_STATUS, sender, seq, status
    )


json_dicts = st.dictionaries(
    st.text(max_size=8),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=8,
    ),
    max_size=5,
)


@given(u32, u64, st.text(), json_dicts, json_dicts)
def test_small_messages_round_trip(sender, seq, topology_id, info, payload):
    assert decode(encode_hello(sender, seq, topology_id, info)).body == Hello(topology_id, info)
    assert decode(encode_control(sender, seq, payload)) == Message(
        Kind.CONTROL, sender, seq, payload
    )


@pytest.mark.parametrize("kind", [4, 5, 6])
def test_retired_kinds_are_unknown_and_never_reused(kind):
    # EOS, EOS_ACK and HEARTBEAT were never sent; their numbers stay out of use
    assert kind not in {k.value for k in Kind}
    with pytest.raises(FrameError, match=f"unknown kind {kind}"):
        decode([header(kind), b"{}"])


def test_control_messages_are_never_pickled():
    status = BackpressureStatus(1, 1, frozenset({1}), frozenset())
    for frames in (
        encode_status(1, 1, status),
        encode_hello(1, 1, "t", {}),
        encode_control(1, 1, {}),
    ):
        assert not any(bytes(f).startswith(b"\x80") for f in frames[1:])


def test_encoding_errors_name_the_value():
    with pytest.raises(ValueError, match="sender -1 must be a uint32"):
        encode_control(-1, 0, {})
    with pytest.raises(ValueError, match="seq 18446744073709551616"):
        encode_tuples(0, 2**64, [])
    with pytest.raises(TypeError, match="CONTROL payload must be a dict"):
        encode_control(0, 0, [1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="status 1 of worker 1"):
        encode_status(0, 0, BackpressureStatus(1, 1, frozenset({-1}), frozenset()))


# ---- errors ----------------------------------------------------------------------------


def status_body(worker=1, n_bp=1, n_free=0, tasks=(5,)) -> bytes:
    import struct

    return struct.pack(f"!IQII{len(tasks)}I", worker, 9, n_bp, n_free, *tasks)


@pytest.mark.parametrize(
    ("frames", "message"),
    [
        ([], "empty message: no frames"),
        ([b"SMSH"], "frame 0: truncated header: 4 bytes, expected 18"),
        ([header() + b"x"], "frame 0: header too long: 19 bytes"),
        ([header(magic=b"HTTP")], "frame 0: bad magic b'HTTP'"),
        ([header(version=2)], "frame 0: unsupported version 2 \\(this build speaks 1\\)"),
        ([header(kind=0)], "frame 0: unknown kind 0"),
        ([header(Kind.CONTROL), b"", b""], "wrong frame count for CONTROL: 3, expected 2"),
        ([header(kind=Kind.TUPLES)], "wrong frame count for TUPLES: 1, expected at least 2"),
        ([header(Kind.CONTROL)], "wrong frame count for CONTROL: 1, expected 2"),
        ([header(Kind.TUPLES), b"\x80\x05junk"], "frame 1: undecodable TUPLES body: Unpickl"),
        (
            [header(Kind.TUPLES), pickle.dumps({})],
            "frame 1: .*a list of batches expected, got dict",
        ),
        (
            [header(Kind.TUPLES), pickle.dumps([(1, 2, "s", [1], [1, 2])])],
            "frame 1: .*batch 0 is not",
        ),
        ([header(Kind.TUPLES), pickle.dumps([(1, 2, 3, [], None)])], "batch 0 is not"),
        (
            [header(Kind.TUPLES), pickle.dumps([]), b"extra"],
            "wrong frame count for TUPLES: 3, .* left out-of-band frames unused",
        ),
        ([header(Kind.BP_STATUS), b"\0" * 5], "frame 1: undecodable BP_STATUS body: truncated"),
        ([header(Kind.BP_STATUS), status_body(n_bp=2)], "frame 1: .*24 bytes, expected 28"),
        ([header(Kind.BP_STATUS), status_body(worker=3)], "status of worker 3 sent by worker 1"),
        ([header(Kind.BP_STATUS), status_body(n_free=1, tasks=(5, 5))], "listed twice"),
        ([header(Kind.CONTROL), b"{"], "frame 1: undecodable CONTROL body: not JSON"),
        ([header(Kind.CONTROL), b"\xff"], "not JSON: UnicodeDecodeError"),
        ([header(Kind.CONTROL), b"[" * 100_000], "not JSON: RecursionError"),
        ([header(Kind.CONTROL), b"[]"], "a JSON object expected, got list"),
        ([header(Kind.HELLO), b'{"topology_id": 1}'], "undecodable HELLO body: expected keys"),
        ([header(Kind.HELLO), b'{"topology_id":"t","worker_port_info":[]}'], "must be an object"),
        ([header(kind=Kind.BULK), b"sealed"], "frame 0: unknown kind 10"),  # bulk socket only
        ([header(Kind.BULK_TUPLES), pickle.dumps([]), b"\0" * 4], "buffer counters: 4 bytes"),
        (
            [header(Kind.BULK_TUPLES), pickle.dumps([]), b"\0" * 16],
            "no sealed buffers named",
        ),
        ([None], "frame 0: unreadable header: TypeError"),
        (
            [header(Kind.BP_STATUS), "not a buffer" * 3],
            "frame 1: undecodable BP_STATUS body: TypeError",
        ),
    ],
)
def test_bad_frames_say_which_frame_and_why(frames, message):
    with pytest.raises(FrameError, match=message):
        decode(frames)


def test_a_pickled_persistent_id_that_is_no_buffer_is_refused():
    class WithPid(pickle.Pickler):
        def persistent_id(self, obj):
            return 42 if obj == "marker" else None

    import io

    out = io.BytesIO()
    WithPid(out, protocol=5).dump([(1, 2, "s", ["marker"], None)])
    with pytest.raises(FrameError, match="bad persistent id 42"):
        decode([header(Kind.TUPLES), out.getvalue(), b"unused"])
    with pytest.raises(FrameError, match="UnpicklingError"):
        decode([header(Kind.TUPLES), out.getvalue()])


def garbage_or_message(frames: list) -> None:
    try:
        assert isinstance(decode(frames), Message)
    except FrameError:
        pass


@given(st.lists(st.binary(max_size=64), max_size=5))
def test_arbitrary_frames_give_a_message_or_a_frame_error(frames):
    garbage_or_message(frames)


@given(st.integers(0, 255), st.lists(st.binary(max_size=64), max_size=4))
def test_a_valid_header_with_arbitrary_bodies_gives_a_message_or_a_frame_error(kind, body):
    garbage_or_message([header(kind), *body])


_valid = [
    encode_tuples(1, 2, [(1, 2, "s", [(1, "a", b"b")], [None])]),
    encode_status(1, 2, BackpressureStatus(1, 3, frozenset({1, 2}), frozenset({3}))),
    encode_hello(1, 2, "topo", {"1": [5, 6]}),
    encode_control(1, 2, {"epoch": 5}),
    as_bulk(encode_tuples(1, 2, [(1, 2, "s", [(bytes(70_000),)], None)]), 5, 1, 1),
]


@given(st.sampled_from(_valid), st.data())
def test_corrupted_valid_messages_give_a_message_or_a_frame_error(frames, data):
    frames = on_the_wire(frames)
    i = data.draw(st.integers(0, len(frames) - 1))
    frame = bytearray(frames[i])
    for _ in range(data.draw(st.integers(1, 4))):
        if frame:
            frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    frames[i] = bytes(frame[:cut])
    garbage_or_message(frames)


# ---- packed rows (pickled by the emitting executor, unpickled by the receiving task) -----


def test_packed_rows_cross_as_bytes_and_unpack_to_the_rows():
    rows = [(f"w{i}", i, float(i)) for i in range(40)]
    packed = pack(rows)
    assert isinstance(packed, Packed) and len(packed) == 40
    metas = list(range(40))
    sent = [(5, 1, "default", packed, metas), (6, 1, "s", [(1,)], None)]
    msg = decode(on_the_wire(encode_tuples(1, 2, sent)))
    (dest, src, stream, got, got_metas), plain = msg.body
    assert (dest, src, stream, got_metas) == (5, 1, "default", metas)
    assert type(got) is Packed and len(got) == 40 and got.rows() == rows
    assert plain == (6, 1, "s", [(1,)], None)
    assert unpack([(1, "default", got, None), (2, "s", [(9,)], None)]) == [
        (1, "default", rows, None),
        (2, "s", [(9,)], None),
    ]


def test_what_is_not_packed_crosses_as_it_is():
    assert pack([(1,)] * (PACK_MIN_ROWS - 1)) is None  # a few rows: not worth a call
    assert pack(StampedRows([(1,)] * 40, 1.0)) is None  # an edge with an age
    assert pack(RejectedRows([(1,)] * 40, 3)) is None  # a fan-out's rejection report
    big = b"x" * OOB_THRESHOLD  # a large buffer takes the zero-copy path
    assert pack([(big,)] + [(1,)] * 40) is None
    assert pack([(bytearray(OOB_THRESHOLD),)] * 20) is None  # out of band: stops there
    assert pack([(bytearray(8),)] * 20) is not None
    numpy = pytest.importorskip("numpy")
    assert pack([(numpy.zeros(OOB_THRESHOLD, dtype="u1"),)] * 20) is None
    assert pack([(numpy.zeros(8, dtype="u1"),)] * 20) is not None  # small: in-band
    cyclic: list = []
    cyclic.append(cyclic)
    assert pack([(cyclic,)] * 20) is None  # the fast pickler refuses: the full path decides


def test_a_packed_batch_whose_row_count_or_metas_disagree_is_refused():
    data = pickle.dumps([(1,)] * 20)
    for batch in [(1, 2, "s", data, [0] * 19, 20), (1, 2, "s", data, None, -1)]:
        frames = [header(Kind.TUPLES), pickle.dumps([batch], protocol=5)]
        with pytest.raises(FrameError, match="batch 0 is not"):
            decode(frames)


def test_a_pack_that_does_not_unpack_loses_its_rows_and_is_counted():
    before = Packed.malformed
    bad = [
        (1, "s", Packed(b"not a pickle", 3), [7, 8, 9]),
        (1, "s", Packed(pickle.dumps([1]), 2), None),
    ]
    assert unpack(bad) == [(1, "s", [], None), (1, "s", [], None)]
    assert Packed.malformed == before + 2


def test_a_bulk_message_names_its_sealed_buffers_and_keeps_the_pickle():
    frames = encode_tuples(4, 9, [(1, 2, "s", [(bytes(70_000),), (bytes(80_000),)], None)])
    msg = decode(on_the_wire(as_bulk(frames, 7, 2, 2)))
    assert (msg.kind, msg.sender, msg.seq) == (Kind.BULK_TUPLES, 4, 9)
    assert (msg.body.first, msg.body.count, msg.body.tuples) == (7, 2, 2)
    assert bytes(msg.body.pickle) == bytes(frames[1])


# ---- frames past what a link reads (PIECES) ----------------------------------------------


def test_a_message_with_a_frame_past_a_piece_goes_in_pieces_and_decodes_whole():
    """A worker's link refuses a frame past `PIECE` (a stranger's announced 500 MiB was
    buffered before its handshake failed): a tuple's 40 MiB array (F-ordered: its buffer
    is not C-contiguous), a 20 MiB str in the pickle and a 17 MiB bytes cross in pieces."""
    import numpy as np

    from stormish.transport.frames import PIECE, in_pieces

    array = np.asfortranarray(np.arange(5 << 20, dtype=np.float64).reshape(1 << 10, -1))
    text, blob = "x" * (20 << 20), b"\1" * (17 << 20)
    frames = encode_tuples(3, 9, [(1, 2, "default", [(array, text, blob)], None)])
    assert max(memoryview(f).nbytes for f in frames) > PIECE
    pieces = in_pieces(frames)
    assert max(memoryview(f).nbytes for f in pieces) <= PIECE
    msg = decode(on_the_wire(pieces))
    assert (msg.kind, msg.sender, msg.seq) == (Kind.TUPLES, 3, 9)
    ((_, _, _, [(a, t, b)], _),) = msg.body
    assert (a == array).all() and a.flags.f_contiguous and a.flags.writeable
    assert t == text and b == blob and type(b) is bytes
    small = encode_tuples(3, 10, [(1, 2, "default", [(1,)], None)])
    assert in_pieces(small) is small  # what fits goes as it is


@pytest.mark.parametrize(
    "table, frames, why",
    [
        (b"\0\0\0\1", 2, "a PIECES table of 4 bytes"),
        (b"\0\0\0\1\0\0\0\1", 1, "wrong frame count for PIECES: 3"),
        (b"\0\0\0\1\0\0\0\2", 2, r"piece counts \[1, 2\] do not match its 2 frames"),
        (b"\0\0\0\1\0\0\0\0", 2, r"piece counts \[1, 0\]"),
    ],
)
def test_pieces_that_do_not_match_their_table_are_named(table, frames, why):
    msg = [header(Kind.PIECES), table, *[header()] * frames]
    with pytest.raises(FrameError, match=why):
        decode(msg)


def test_pieces_inside_pieces_are_refused():
    with pytest.raises(FrameError, match="PIECES message inside another"):
        decode([header(Kind.PIECES), b"\0\0\0\1\0\0\0\1", header(Kind.PIECES), b"x"])
