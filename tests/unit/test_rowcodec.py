"""Typed rows (stormish/rowcodec.py) and the compiled twin (stormish/_speedups.c): the
same bytes out of both for every input, the rows back exactly, None for any row pickle
must carry, and a clean ValueError (never a crash, never other rows) for every damaged
or forged buffer; route_keyed places rows as the collector's Python loop does."""

from __future__ import annotations

import math
import shutil
import struct
import sysconfig

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormish import rowcodec
from stormish.transport import frames as fr

compiled = pytest.mark.skipif(
    not rowcodec.COMPILED, reason="stormish._speedups is not built here (no C compiler)"
)

plain = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=300),
    st.binary(max_size=300),
)


@st.composite
def batches(draw):
    arity = draw(st.integers(1, 4))
    row = st.tuples(*[plain] * arity)
    return draw(st.lists(row, min_size=1, max_size=40))


def same(a: list, b: list) -> bool:
    """Equal rows, value types included (1 == 1.0 == True would pass a plain ==), with
    NaN equal to NaN."""
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        if type(ra) is not tuple or type(rb) is not tuple or len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb, strict=True):
            if type(x) is not type(y):
                return False
            if type(x) is float and math.isnan(x):
                if not math.isnan(y) or struct.pack("<d", x) != struct.pack("<d", y):
                    return False
            elif type(x) is float:
                if struct.pack("<d", x) != struct.pack("<d", y):  # -0.0 stays -0.0
                    return False
            elif x != y:
                return False
    return True


@given(batches())
@settings(max_examples=300, deadline=None)
def test_rows_come_back_exactly_through_the_python_codec(rows):
    data = rowcodec.py_pack_rows(rows)
    assert data is not None
    assert same(rowcodec.py_unpack_rows(data, len(rows)), rows)


@compiled
@given(batches())
@settings(max_examples=300, deadline=None)
def test_the_compiled_codec_writes_the_same_bytes_and_reads_them_back(rows):
    data = rowcodec.pack_rows(rows)
    assert data == rowcodec.py_pack_rows(rows)
    assert same(rowcodec.unpack_rows(data, len(rows)), rows)


class Weird(str):
    pass


@pytest.mark.parametrize(
    "rows",
    [
        [],  # nothing to type
        [["a"]],  # a list row: the receiver gets what was emitted, a list
        [("a",), ("b", "c")],  # rows of two arities
        [(2**63,)],  # an int past 64 bits
        [(Weird("x"),)],  # a str subclass: pickle keeps its class
        [("\ud800",)],  # a lone surrogate: UTF-8 cannot carry it
        [({"k": 1},)],  # a dict
        [(1.5, [1])],  # a list value
        [tuple(range(256))],  # arity past a byte
        [()],  # no fields
    ],
)
def test_rows_pickle_must_carry_are_declined(rows):
    assert rowcodec.py_pack_rows(rows) is None
    if rowcodec.COMPILED:
        assert rowcodec.pack_rows(rows) is None


def both_unpackers():
    out = [rowcodec.py_unpack_rows]
    if rowcodec.COMPILED:
        out.append(rowcodec.unpack_rows)
    return out


@given(batches(), st.data())
@settings(max_examples=300, deadline=None)
def test_a_damaged_buffer_is_refused_or_read_alike_by_both_never_a_crash(rows, data):
    good = rowcodec.py_pack_rows(rows)
    assert good is not None
    raw = bytearray(good)
    how = data.draw(st.sampled_from(["flip", "cut", "grow", "count"]))
    if how == "flip":
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        del raw[data.draw(st.integers(0, len(raw) - 1)) :]
    elif how == "grow":
        raw += data.draw(st.binary(min_size=1, max_size=8))
    n = len(rows) + (data.draw(st.integers(-3, 3)) if how == "count" else 0)
    results = []
    for unpack in both_unpackers():
        try:
            results.append(("rows", unpack(bytes(raw), n)))
        except ValueError as e:
            results.append(("error", str(e)))
    if len(results) == 2:  # the twins agree on every buffer, damaged or not
        (ka, va), (kb, vb) = results
        assert ka == kb
        assert same(va, vb) if ka == "rows" else va == vb


@pytest.mark.parametrize(
    "raw,why",
    [
        (b"", "bad header"),
        (b"R\x02\x01\x01\x00\x00\x00\x00", "bad header"),  # version 2
        (b"R\x01\x00\x01\x00\x00\x00", "wrong arity"),
        (b"R\x01\x01\xff\xff\xff\xff\x00", "wrong arity or row count"),  # n != expected
        (b"R\x01\x01\x01\x00\x00\x00\x09", "unknown tag"),
        (b"R\x01\x01\x01\x00\x00\x00\x06\xff\xff\xff\x7fab", "truncated value"),  # 2 GiB str
        (b"R\x01\x01\x01\x00\x00\x00\x05\x02\xff\xfe", "invalid UTF-8"),
        (b"R\x01\x01\x01\x00\x00\x00\x00\x00", "trailing bytes"),
    ],
)
def test_forged_buffers_name_what_is_wrong(raw, why):
    for unpack in both_unpackers():
        with pytest.raises(ValueError, match=why):
            unpack(raw, 1)


def test_a_packed_batch_of_typed_rows_that_does_not_decode_is_a_frame_error():
    with pytest.raises(fr.FrameError, match="undecodable packed rows"):
        fr.Packed(b"R\x01\x01\x01\x00\x00\x00\x09", 1).rows()


@compiled
def test_pack_types_flat_rows_and_leaves_the_rest_to_pickle():
    words = [(f"w{i}",) for i in range(fr.PACK_MIN_ROWS)]
    packed = fr.pack(words)
    assert packed is not None and packed.data[:1] == b"R"
    assert packed.rows() == words
    lists = [[f"w{i}"] for i in range(fr.PACK_MIN_ROWS)]
    packed = fr.pack(lists)
    assert packed is not None and packed.data[:1] == b"\x80"  # a pickle: lists stay lists
    assert packed.rows() == lists


# -- route_keyed --------------------------------------------------------------------------


class Box(list):
    """An outbox (a list subclass, as routing.Outbox)."""


def routers():
    out = [rowcodec.py_route_keyed]
    if rowcodec.COMPILED:
        out.append(rowcodec.route_keyed)
    return out


def route_all(route, rows, fidx, cache, boxes):
    """What Collector._put_keyed does: misses go through the grouping (here: a new box
    cached under the key; unhashable keys to box 0)."""
    i, n = 0, len(rows)
    while (i := route(rows, fidx, cache, i)) < n:
        v = rows[i]
        try:
            ob = cache.setdefault(v[fidx], boxes[hash(v[fidx]) % len(boxes)])
        except TypeError:
            ob = boxes[0]
        ob.append(v)
        i += 1


@given(
    st.lists(
        st.tuples(st.one_of(st.integers(0, 20), st.text(max_size=2), st.just([1])), st.integers()),
        max_size=60,
    ),
    st.dictionaries(st.integers(0, 20), st.integers(0, 2), max_size=10),
)
@settings(max_examples=300, deadline=None)
def test_route_keyed_places_every_row_in_order_as_the_python_loop(rows, seed):
    placed = []
    for route in routers():
        boxes = [Box(), Box(), Box()]
        cache = {k: boxes[b] for k, b in seed.items()}
        route_all(route, rows, 0, cache, boxes)
        placed.append([list(b) for b in boxes])
        assert sum(map(len, boxes)) == len(rows)
    expect = []  # the Python loop of Collector._put_keyed, for the same input
    boxes = [Box(), Box(), Box()]
    cache = {k: boxes[b] for k, b in seed.items()}
    for v in rows:
        try:
            ob = cache[v[0]]
        except KeyError:
            ob = cache.setdefault(v[0], boxes[hash(v[0]) % 3])
        except TypeError:
            ob = boxes[0]
        ob.append(v)
    expect = [list(b) for b in boxes]
    assert all(p == expect for p in placed)


def test_route_keyed_stops_at_rows_it_cannot_place():
    box = Box()
    cache = {"a": box, "f": "not a list"}
    for route in routers():
        assert route([("a",), ("a",), ("b",)], 0, cache, 0) == 2  # not cached
        assert route([("a",), ([],)], 0, cache, 0) == 1  # unhashable
        assert route([("a",), ("f",)], 0, cache, 0) == 1  # a fan-out's answer
        assert route([("a",), ()], 0, cache, 0) == 1  # too short
        assert route([("a",), "a"], 0, cache, 0) == 1  # not a row
        assert route([("a",)], 0, cache, 1) == 1  # nothing from start
    assert len(box) == 6 * len(routers())


@compiled
def test_a_key_whose_eq_empties_the_rows_does_not_crash_route_keyed():
    rows: list = []

    class Evil:
        def __hash__(self):
            return 1

        def __eq__(self, other):
            rows.clear()  # the list being routed, mid-route
            return True

    box = Box()
    cache = {Evil(): box}
    rows.extend([(Evil(),), (Evil(),), (Evil(),)])
    i = rowcodec.route_keyed(rows, 0, cache, 0)
    assert i <= 1 and len(rows) == 0


def test_the_compiled_part_is_built_where_a_c_compiler_is_found():
    """`pip install .` builds stormish._speedups where it can; a silent fallback on a
    machine with a compiler would cost a 2-worker word count ~10% without a word."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}) on this machine: the pure-Python paths run")
    assert rowcodec.COMPILED, "a C compiler is here but stormish._speedups was not built"


def test_without_the_compiled_part_rows_cross_as_pickles_and_typed_rows_still_read(
    monkeypatch,
):
    """A host where it did not build sends pickles (the Python twin writes slower than
    pickle) and reads a peer's typed rows with the Python twin."""
    words = [(f"w{i}", i) for i in range(fr.PACK_MIN_ROWS)]
    typed = rowcodec.py_pack_rows(words)
    monkeypatch.setattr(rowcodec, "pack_rows", None)
    monkeypatch.setattr(rowcodec, "unpack_rows", rowcodec.py_unpack_rows)
    packed = fr.pack(words)
    assert packed is not None and packed.data[:1] == b"\x80"
    assert packed.rows() == words
    assert fr.Packed(typed, len(words)).rows() == words


# -- route_str ----------------------------------------------------------------------------


def str_routers():
    out = [rowcodec.py_route_str]
    if rowcodec.COMPILED:
        out.append(rowcodec.route_str)
    return out


@given(
    st.lists(
        st.tuples(st.one_of(st.text(max_size=6), st.integers(0, 9)), st.integers()),
        max_size=60,
    ),
    st.integers(1, 5),
)
@settings(max_examples=300, deadline=None)
def test_route_str_picks_the_fields_groupings_own_task_for_every_str_key(rows, k):
    """The task a str key goes to is the grouping's (stable_hash: crc32 of its UTF-8),
    so compiled and Python emitters in any worker agree; it stops at the first key that
    is not a str."""
    from stormish.runtime.grouping import Fields

    for route in str_routers():
        boxes = tuple(Box() for _ in range(k))
        fields = Fields(boxes, [0])
        i = route(rows, 0, boxes, 0)
        first_other = next((j for j, r in enumerate(rows) if type(r[0]) is not str), len(rows))
        assert i == first_other
        for box in boxes:
            for row in box:
                assert fields.pick(row) is box
        assert [r for b in boxes for r in b] == sorted(
            rows[:i], key=lambda r: boxes.index(fields.pick(r))
        )  # noqa: E501


def test_route_str_leaves_a_lone_surrogate_and_odd_rows_to_the_grouping():
    boxes = (Box(), Box())
    for route in str_routers():
        assert route([("a",), ("\ud800",)], 0, boxes, 0) == 1
        assert route([("a",), ["b"], ("c", 1)], 0, boxes, 0) == 3
        assert route([("a",), ()], 0, boxes, 0) == 1
        assert route([("a",), (Weird("b"),)], 0, boxes, 0) == 1


@compiled
def test_crc32_str_is_zlibs():
    import zlib

    for s in ["", "a", "word", "é", "日本語" * 40, "x" * 5000]:
        assert rowcodec._compiled.crc32_str(s) == zlib.crc32(s.encode())


# -- found by review: each crashed the interpreter or differed from the twin -------------


@compiled
def test_a_negative_field_index_is_refused_not_read_before_the_tuple():
    with pytest.raises(ValueError, match="fidx"):
        rowcodec.route_keyed([(1, 2, 3)], -1, {3: []}, 0)
    with pytest.raises(ValueError, match="fidx"):
        rowcodec.route_str([("x", "y")], -1, ([],), 0)


@compiled
def test_pack_sizes_its_buffer_by_what_it_writes_not_by_the_first_row():
    # 15M rows of arity 255 once reserved ~30 GB before finding row 1 was not a row
    assert rowcodec.pack_rows([tuple(range(255))] + [None] * 3_000_000) is None


@compiled
def test_the_garbage_collector_never_sees_a_half_built_batch():
    import gc

    data = rowcodec.pack_rows([(i, "w") for i in range(5000)])
    seen = []

    def look(phase, info):
        if phase == "start":
            for o in gc.get_objects(0):
                if type(o) is list and len(o) == 5000:
                    seen.append(repr(o[-1]))  # a NULL slot here crashed

    gc.callbacks.append(look)
    try:
        rows = rowcodec.unpack_rows(data, 5000)
    finally:
        gc.callbacks.remove(look)
    assert rows[-1] == (4999, "w") and seen == []


# -- tree ids -----------------------------------------------------------------------------

i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
metas_lists = st.lists(
    st.one_of(st.none(), st.lists(st.tuples(i64, i64), max_size=4).map(tuple)),
    min_size=1,
    max_size=40,
)


@given(metas_lists)
@settings(max_examples=300, deadline=None)
def test_tree_ids_come_back_exactly_and_alike_from_both_twins(metas):
    data = rowcodec.py_pack_metas(metas)
    assert data is not None
    assert rowcodec.py_unpack_metas(data, len(metas)) == metas
    if rowcodec.COMPILED:
        assert rowcodec.pack_metas(metas) == data
        assert rowcodec.unpack_metas(data, len(metas)) == metas


@pytest.mark.parametrize(
    "metas",
    [[], [((1, 2, 3),)], [((1, "2"),)], [((2**63, 1),)], [[(1, 2)]], [((1, 2),) * 254], [5]],
)
def test_tree_ids_pickle_must_carry_are_declined(metas):
    assert rowcodec.py_pack_metas(metas) is None
    if rowcodec.COMPILED:
        assert rowcodec.pack_metas(metas) is None


@given(metas_lists, st.data())
@settings(max_examples=300, deadline=None)
def test_damaged_tree_ids_are_refused_or_read_alike_never_a_crash(metas, data):
    raw = bytearray(rowcodec.py_pack_metas(metas))
    how = data.draw(st.sampled_from(["flip", "cut", "grow", "count"]))
    if how == "flip":
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        del raw[data.draw(st.integers(0, len(raw) - 1)) :]
    elif how == "grow":
        raw += data.draw(st.binary(min_size=1, max_size=20))
    n = len(metas) + (data.draw(st.integers(-3, 3)) if how == "count" else 0)
    results = []
    unpackers = [rowcodec.py_unpack_metas]
    if rowcodec.COMPILED:
        unpackers.append(rowcodec.unpack_metas)
    for unpack in unpackers:
        try:
            results.append(("ids", unpack(bytes(raw), n)))
        except ValueError as e:
            results.append(("error", str(e)))
    assert all(r == results[0] for r in results)


@compiled
def test_a_tracked_batch_crosses_with_typed_ids_and_comes_out_whole():
    rows = [(f"w{i}",) for i in range(fr.PACK_MIN_ROWS)]
    metas = [((7, i),) for i in range(len(rows))]
    packed = fr.pack(rows)
    ids = fr.pack_metas(metas)
    assert type(ids) is bytes
    frames = fr.encode_tuples(0, 1, [(3, 4, "default", packed, ids)])
    (got,) = fr.decode([bytes(f) for f in frames]).body
    assert fr.unpack([got[1:]]) == [(4, "default", rows, metas)]
    damaged = (3, 4, "default", packed, ids[:-1])
    (got,) = fr.decode([bytes(f) for f in fr.encode_tuples(0, 2, [damaged])]).body
    before = fr.Packed.malformed
    assert fr.unpack([got[1:]]) == [(4, "default", [], None)]  # lost, counted; trees replay
    assert fr.Packed.malformed == before + 1


@compiled
def test_a_word_read_again_is_the_same_str_and_colliding_words_stay_themselves():
    """Short ASCII strs are reused from a small table (their hash stays cached in them,
    and a dict keyed by one finds it by identity); a slot another word took gives that
    other word, never the wrong one."""
    words = [(f"w{i}",) for i in range(20_000)]  # far more words than the table's slots
    data = rowcodec.pack_rows(words)
    first, again = rowcodec.unpack_rows(data, len(words)), rowcodec.unpack_rows(data, len(words))
    assert first == words and again == words
    few = rowcodec.pack_rows([("count",), ("word",), ("count",)])
    a, b = rowcodec.unpack_rows(few, 3), rowcodec.unpack_rows(few, 3)
    assert a[0][0] is b[0][0] is b[2][0] and a[1][0] is b[1][0]
    long = [("x" * 40,)] * 2  # past the table's length: made each time, equal
    a, b = rowcodec.unpack_rows(rowcodec.pack_rows(long), 2)
    assert a == b == long[0] and a[0] is not b[0]


@compiled
def test_a_one_word_row_read_again_is_the_same_row_and_only_that_kind_is_shared():
    """A row of one short ASCII str is reused with its str (no tuple made, nor freed
    after its batch); rows of other shapes, long or non-ASCII words, are made each time.
    A slot another word took since gives that word's row, never a stale one."""
    few = rowcodec.pack_rows([("count",), ("word",), ("count",)])
    a, b = rowcodec.unpack_rows(few, 3), rowcodec.unpack_rows(few, 3)
    assert a == b == [("count",), ("word",), ("count",)]
    assert a[0] is b[0] is b[2] and a[1] is b[1] and type(a[0]) is tuple
    for rows in ([("x" * 40,)] * 2, [("wörd",)] * 2, [("a", "b")] * 2, [(7,)] * 2):
        got = rowcodec.unpack_rows(rowcodec.pack_rows(rows), 2)
        assert got == rows and got[0] is not got[1]
    words = [(f"w{i}",) for i in range(20_000)]  # evicts every slot, many times over
    data = rowcodec.pack_rows(words)
    assert rowcodec.unpack_rows(data, len(words)) == words
    assert rowcodec.unpack_rows(data, len(words)) == words
    assert rowcodec.unpack_rows(few, 3) == [("count",), ("word",), ("count",)]
