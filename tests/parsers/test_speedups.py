"""The compiled speedups (``parsers/_speedups.c``) agree with the pure-Python code they replace.

Python is the specification: on any input the compiled record splitter and JSON renderer
must give the same records, the same bytes, or the same error (type, offset, message). The
module fails when the extension should have been built but was not (see
``tests/parsers/compiled.py``), and skips only with ``STATEGLASS_PURE=1`` or without a C
compiler; the rest of the suite then runs on the Python code alone.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.app.render.bytes_to_json import (
    _compiled_plan,
    state_blob_encoder,
    state_line_encoder,
    state_lines_encoder,
)
from stateglass.parsers import hdfs_files as records_module
from stateglass.parsers.errors import ParseError, UnsupportedFormat
from stateglass.parsers.hdfs_files import iter_records, read_record_keys, read_records
from stateglass.parsers.java_bytes import _murmur3_hash_bytes
from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    StructField,
    StructType,
)
from stateglass.parsers.unsafewriter import encode_row
from tests.parsers.compiled import Outcome, _damaged, _mutate_row, compiled_speedups, outcome
from tests.parsers.row_strategies import ZONES, state_rows, struct_types
from tests.parsers.state_encoders import encode_records

_speedups = compiled_speedups()

FAST = settings(max_examples=150, deadline=None, database=None)

# ------------------------------------------------------------------------------ records

keys = st.binary(max_size=40)
values = st.integers(0, 12).flatmap(lambda n: st.binary(min_size=8 * n, max_size=8 * n))
changes = st.lists(st.tuples(keys, st.one_of(st.none(), values, st.binary(max_size=30))))


@FAST
@given(records=changes, allow_deletes=st.booleans())
def test_records_agree_on_clean_streams(
    records: list[tuple[bytes, bytes | None]], allow_deletes: bool
) -> None:
    stream = encode_records(records)
    expected = outcome(lambda: list(iter_records(stream, allow_deletes=allow_deletes)))
    compiled = _speedups.read_records(stream, allow_deletes)
    if expected[0] == "ok":
        assert compiled == expected[1]
        assert outcome(read_records, stream, allow_deletes=allow_deletes) == expected
        puts, dels, ordered = read_record_keys(stream, allow_deletes=allow_deletes)
        assert puts == [k for k, v in expected[1] if v is not None]
        assert dels == [k for k, v in expected[1] if v is None]
        assert (puts, dels, ordered) == records_module._read_record_keys_python(
            stream, allow_deletes
        )
    else:  # a remove in a snapshot
        assert compiled is None
        assert outcome(read_records, stream, allow_deletes=allow_deletes) == expected


@FAST
@given(records=changes, allow_deletes=st.booleans(), data=st.data())
def test_records_agree_on_damaged_streams(
    records: list[tuple[bytes, bytes | None]], allow_deletes: bool, data: st.DataObject
) -> None:
    stream = _damaged(encode_records(records), data)
    expected = outcome(lambda: list(iter_records(stream, allow_deletes=allow_deletes)))
    got = outcome(read_records, stream, allow_deletes=allow_deletes)
    assert got == expected
    assert got == outcome(records_module._read_records_python, stream, allow_deletes)
    assert (_speedups.read_records(stream, allow_deletes) is None) == (expected[0] == "error")
    keys_got = outcome(read_record_keys, stream, allow_deletes=allow_deletes)
    if expected[0] == "error":
        assert keys_got == expected
    else:
        assert keys_got[1][0] == [k for k, v in expected[1] if v is not None]


@FAST
@given(stream=st.binary(max_size=120), allow_deletes=st.booleans())
def test_records_agree_on_random_bytes(stream: bytes, allow_deletes: bool) -> None:
    expected = outcome(lambda: list(iter_records(stream, allow_deletes=allow_deletes)))
    assert outcome(read_records, stream, allow_deletes=allow_deletes) == expected
    if expected[0] == "error":
        assert outcome(read_record_keys, stream, allow_deletes=allow_deletes) == expected


def test_records_accept_buffers() -> None:
    stream = encode_records([(b"k", bytes(8)), (b"gone", None)])
    expected = [(b"k", bytes(8)), (b"gone", None)]
    assert _speedups.read_records(memoryview(stream), True) == expected
    assert _speedups.read_records(bytearray(stream), True) == expected
    assert _speedups.read_record_keys(stream, True) == ([b"k"], [b"gone"])


def test_records_truncated_offset_is_the_record_start() -> None:
    stream = encode_records([(b"a" * 8, bytes(16)), (b"b" * 8, bytes(16))])
    with pytest.raises(ParseError) as info:
        read_records(stream[:-10])
    assert type(info.value).__name__ == "Truncated"
    assert info.value.offset == 4 + 8 + 4 + 16  # where the second record starts


# ------------------------------------------------------------------------------ JSON lines


def python_blob(
    key: StructType, value: StructType, pairs: list[Any], pid: int, zone: str = "UTC"
) -> Outcome:
    def run() -> bytes:
        lines = state_lines_encoder(key, value, zone)(pairs, pid)
        return "".join(line + "\n" for line in lines).encode("utf-8")

    return outcome(run)


def compiled_blob(
    key: StructType, value: StructType, pairs: list[Any], pid: int, zone: str = "UTC"
) -> Outcome:
    blob = state_blob_encoder(key, value, zone)

    def run() -> bytes:
        data, rows = blob(iter(pairs), pid)
        assert rows == len(pairs)
        return data

    return outcome(run)


@settings(max_examples=300, deadline=None, database=None)
@given(case=state_rows(), pid=st.integers(0, 2**31 - 1), zone=ZONES)
def test_rendering_agrees_on_valid_rows(case: Any, pid: int, zone: str) -> None:
    check_valid_rows(case, pid, zone)


@settings(max_examples=40, deadline=None, database=None)
@given(case=state_rows(struct_types()))
def test_rendering_agrees_on_random_schemas(case: Any) -> None:
    check_valid_rows(case, 0)


@settings(max_examples=60, deadline=None, database=None)
@given(case=state_rows(struct_types(rich=True)), zone=ZONES)
def test_rendering_agrees_on_random_schemas_of_every_type(case: Any, zone: str) -> None:
    check_valid_rows(case, 0, zone)


def check_valid_rows(case: Any, pid: int, zone: str = "UTC") -> None:
    key, value, pairs = case
    key_plan, value_plan = _compiled_plan(key, zone), _compiled_plan(value, zone)
    assert key_plan is not None and value_plan is not None
    # Valid rows never leave the compiled loop: the comparison below is C against Python
    # (values C does not format itself are the field's Python function, called from C).
    plan = _speedups.compile_plan(key_plan, value_plan)
    chunk, pending, rows = _speedups.render_lines(plan, pairs, pid)
    assert pending is None and rows == len(pairs)
    expected = python_blob(key, value, pairs, pid, zone)
    assert expected == ("ok", chunk)
    assert compiled_blob(key, value, pairs, pid, zone) == expected


@settings(max_examples=200, deadline=None, database=None)
@given(case=state_rows(), data=st.data(), zone=ZONES)
def test_rendering_agrees_on_damaged_rows(case: Any, data: st.DataObject, zone: str) -> None:
    key, value, pairs = case
    if not pairs:
        return
    at = data.draw(st.integers(0, len(pairs) - 1))
    kb, vb = pairs[at]
    if vb is not None and data.draw(st.booleans()):
        vb = _mutate_row(vb, data)
    else:
        kb = _mutate_row(kb, data)
    pairs[at] = (kb, vb)
    assert compiled_blob(key, value, pairs, 3, zone) == python_blob(key, value, pairs, 3, zone)


@FAST
@given(raw=st.lists(st.binary(max_size=12), min_size=1, max_size=3), data=st.data())
def test_rendering_agrees_on_invalid_utf8(raw: list[bytes], data: st.DataObject) -> None:
    # The same bytes as binary and read as string: Java's decoding of bad UTF-8 is Python's.
    as_binary = StructType(tuple(StructField(f"s{i}", AtomicType("binary")) for i in range(3)))
    as_string = StructType(tuple(StructField(f"s{i}", AtomicType("string")) for i in range(3)))
    value = StructType((StructField("n", AtomicType("long")),))
    row = [*raw, *([None] * (3 - len(raw)))]
    row[data.draw(st.integers(0, 2))] = data.draw(st.binary(max_size=6)) + b"\xed\xa0\x80"
    pairs = [(encode_row(as_binary, row), encode_row(value, (1,)))] * 2
    assert compiled_blob(as_string, value, pairs, 0) == python_blob(as_string, value, pairs, 0)


def test_rows_the_compiled_loop_hands_back() -> None:
    key = StructType((StructField("k", AtomicType("string")),))
    value = StructType((StructField("n", AtomicType("long")),))
    good = (encode_row(key, ("a",)), encode_row(value, (1,)))
    odd = [
        good,
        (memoryview(good[0]), good[1]),  # not bytes
        [good[0], good[1]],  # not a tuple
        (good[0], None),  # a removed key: no "value"
        (encode_row(key, ("\x1f\\u001f",)), good[1]),
        good,
    ]
    data, rows = state_blob_encoder(key, value)(odd, 7)
    line = state_line_encoder(key, value)
    assert data.decode() == "".join(line(k, v, 7) + "\n" for k, v in odd)
    assert rows == len(odd)
    # Jackson: the control character as \u001F, the text "\u001f" with its backslash doubled.
    assert data.decode().splitlines()[4] == (
        '{"key":{"k":"\\u001F\\\\u001f"},"value":{"n":1},"partition_id":7}'
    )


def test_void_field_with_its_null_bit_clear_is_null() -> None:
    value = StructType((StructField("__dummy__", AtomicType("void")),))
    key = StructType((StructField("k", AtomicType("integer")),))
    kb = encode_row(key, (-5,))
    cleared = bytes(8) + encode_row(value, (None,))[8:]
    data, _ = state_blob_encoder(key, value)([(kb, encode_row(value, (None,))), (kb, cleared)], 0)
    assert data.decode().splitlines() == [
        '{"key":{"k":-5},"value":{},"partition_id":0}',
        '{"key":{"k":-5},"value":{"__dummy__":null},"partition_id":0}',
    ]
    assert data == python_blob(key, value, [(kb, encode_row(value, (None,))), (kb, cleared)], 0)[1]


def test_variant_schemas_stay_in_python() -> None:
    variant = StructType((StructField("v", AtomicType("variant")),))
    with pytest.raises(UnsupportedFormat):
        _compiled_plan(variant)
    double = StructType((StructField("avg", AtomicType("double")),))
    nested = StructType((StructField("w", double),))
    assert _compiled_plan(nested) is not None
    key = StructType((StructField("k", AtomicType("string")),))
    pairs = [(encode_row(key, ("a",)), encode_row(nested, ((0.1,),)))]
    assert compiled_blob(key, nested, pairs, 1) == python_blob(key, nested, pairs, 1)
    assert compiled_blob(key, nested, pairs, 1)[1] == (
        b'{"key":{"k":"a"},"value":{"w":{"avg":0.1}},"partition_id":1}\n'
    )


def test_a_python_function_that_raises_hands_the_row_back() -> None:
    # A damaged array: its generated function raises, the row goes to the Python encoder,
    # which raises the same error with the row's context.
    key = StructType((StructField("k", AtomicType("string")),))
    value = StructType((StructField("a", ArrayType(AtomicType("long"))),))
    good = encode_row(value, ([1, 2, None],))
    bad = good[:16] + b"\xff\xff\xff\x7f" + good[20:]  # element count far past the end
    pairs = [(encode_row(key, ("a",)), good), (encode_row(key, ("b",)), bad)]
    got = compiled_blob(key, value, pairs, 0)
    assert got == python_blob(key, value, pairs, 0)
    assert got[0] == "error"


def test_plan_codes_need_their_functions() -> None:
    with pytest.raises(ValueError, match="needs a function"):
        _speedups.compile_plan(((b'"d":', 8, None, None, 0, b""),), ())
    with pytest.raises(ValueError, match="unknown plan type code"):
        _speedups.compile_plan(((b'"d":', 99, None, None, 0, b""),), ())


def test_python_text_that_fails_hands_the_row_back() -> None:
    # The C side of the contract with a field's Python function: a function that raises, or
    # returns text that is not UTF-8 encodable or not a str, leaves the row to Python.
    key = StructType((StructField("t", AtomicType("long")),))
    kb = encode_row(key, (5,))

    def boom(value: int) -> str:
        raise ValueError(value)

    for fn in (boom, lambda v: "\ud800", lambda v: 7, lambda v: str(v * 2)):
        for code in (15, 16):  # T_CALL4 reads the low 4 bytes of the slot, T_CALL8 all 8
            plan = _speedups.compile_plan(((b'"t":', code, None, fn, 0, b""),), ())
            chunk, pending, rows = _speedups.render_lines(plan, [(kb, None)], 0)
            if fn is not boom and fn(1) == "2":
                assert (chunk, pending, rows) == (b'{"key":{"t":10},"partition_id":0}\n', None, 1)
            else:
                assert (chunk, pending, rows) == (b"", (kb, None), 0)


# ------------------------------------------------------------------------------ binary columns


@FAST
@given(pairs=st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=40)), max_size=50))
def test_binary_column_is_the_array_pyarrow_builds(pairs: list[tuple[bytes, bytes]]) -> None:
    import pyarrow as pa

    from stateglass.parsers.state_arrow import _binary_column

    for index in (0, 1):
        expected = pa.array([p[index] for p in pairs], type=pa.large_binary())
        got = _binary_column(pairs, index)
        got.validate(full=True)
        assert got.equals(expected)


def test_binary_column_refuses_what_is_not_pairs_of_bytes() -> None:
    assert _speedups.binary_column([(b"k", None)], 1) is None
    assert _speedups.binary_column([(b"k",)], 0) is None
    assert _speedups.binary_column([[b"k", b"v"]], 0) is None


@FAST
@given(
    pairs=st.lists(st.tuples(st.binary(max_size=20), st.binary(max_size=20)), max_size=30),
    index=st.integers(0, 1),
    versioned=st.booleans(),
)
def test_binary_column_strips_version_bytes_or_refuses(
    pairs: list[tuple[bytes, bytes]], index: int, versioned: bool
) -> None:
    """RocksDB's pairs: a column past the leading version byte 0, only when every key and
    value starts with one (else None: RowCodec.payloads judges each pair)."""
    from stateglass.parsers.state_arrow import _binary_column, _large_binary

    if versioned:
        pairs = [(b"\x00" + k, b"\x00" + v) for k, v in pairs]
    got = _speedups.binary_column(pairs, index, True)
    if all(k[:1] == b"\x00" and v[:1] == b"\x00" for k, v in pairs):
        assert got is not None
        column = _large_binary(len(pairs), got)
        column.validate(full=True)
        assert column.equals(_binary_column([(k[1:], v[1:]) for k, v in pairs], index))
    else:
        assert got is None


# ------------------------------------------------------------------------------ murmur3


@FAST
@given(data=st.binary(max_size=70), seed=st.integers(-(2**31), 2**32 - 1))
def test_murmur3_agrees(data: bytes, seed: int) -> None:
    assert _speedups.murmur3_bytes(data, seed) == _murmur3_hash_bytes(data, seed)


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=64),
    spans=st.lists(st.tuples(st.integers(-2, 70), st.integers(-1, 70)), max_size=20),
)
def test_gathered_bytes_are_the_spans_or_refused(data: bytes, spans: list[tuple[int, int]]) -> None:
    """``gather_bytes`` (a string column's values out of its rows) copies each span whole, or
    refuses when one falls outside the data: numpy's path then decides."""
    import array

    starts = array.array("q", [s for s, _ in spans])
    sizes = array.array("q", [n for _, n in spans])
    got = _speedups.gather_bytes(data, starts.tobytes(), sizes.tobytes())
    if any(n < 0 or s < 0 or s + n > len(data) for s, n in spans):
        assert got is None
        return
    assert got is not None
    offsets, payload = got
    at = memoryview(offsets).cast("q")
    assert [payload[at[i] : at[i + 1]] for i in range(len(spans))] == [
        data[s : s + n] for s, n in spans
    ]
