"""RocksDB's stored pairs rendered with their version bytes skipped in C agree with Python.

A RocksDB store keeps each key and value as a version byte 0 followed by the UnsafeRow
(``RowCodec.payloads`` takes the rows out). ``state_prefixed_blob_encoder`` renders the
common pair in C without making the inner rows; every other pair (another first byte, a
damaged row) goes through ``payloads`` and the Python line. The result must be the bytes,
or the error, of the Python path: ``filter(None, starmap(payloads, pairs))`` rendered.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.app.render.bytes_to_json import state_lines_encoder, state_prefixed_blob_encoder
from stateglass.parsers.sparktypes import StructType
from stateglass.parsers.state_rows import RowCodec, StoreSpec
from stateglass.parsers.unsafewriter import encode_row
from tests.parsers.compiled import Outcome, _mutate_row, compiled_speedups, outcome
from tests.parsers.row_strategies import SCHEMAS, ZONES, draw_row

compiled_speedups()


@st.composite
def stored_pairs(draw: st.DrawFn) -> tuple[StructType, StructType, list[tuple[bytes, bytes]]]:
    key_schema, value_schema = draw(st.sampled_from(SCHEMAS)), draw(st.sampled_from(SCHEMAS))
    pairs = []
    for _ in range(draw(st.integers(0, 6))):
        key = b"\x00" + encode_row(key_schema, draw_row(draw, key_schema))
        value = b"\x00" + encode_row(value_schema, draw_row(draw, value_schema))
        pairs.append((key, value))
    return key_schema, value_schema, pairs


def python_blob(codec: RowCodec, pairs: list[tuple[bytes, bytes]], zone: str) -> Outcome:
    def run() -> bytes:
        rows = filter(None, itertools.starmap(codec.payloads, pairs))
        lines = state_lines_encoder(codec.key_schema, codec.value_schema, zone)(rows, 5)
        return "".join(line + "\n" for line in lines).encode("utf-8")

    return outcome(run)


def compiled_blob(codec: RowCodec, pairs: list[tuple[bytes, bytes]], zone: str) -> Outcome:
    blob = state_prefixed_blob_encoder(codec.key_schema, codec.value_schema, zone)

    def run() -> bytes:
        data, rows = blob(iter(pairs), 5, codec.payloads)
        assert rows == data.count(b"\n")
        return data

    return outcome(run)


def codec_of(key: StructType, value: StructType) -> RowCodec:
    return RowCodec(StoreSpec(provider="rocksdb", key_schema=key, value_schema=value))


@settings(max_examples=200, deadline=None, database=None)
@given(case=stored_pairs(), zone=ZONES)
def test_prefixed_rows_agree_with_python(case: Any, zone: str) -> None:
    key, value, pairs = case
    codec = codec_of(key, value)
    expected = python_blob(codec, pairs, zone)
    assert expected[0] == "ok"
    assert compiled_blob(codec, pairs, zone) == expected


@settings(max_examples=200, deadline=None, database=None)
@given(case=stored_pairs(), data=st.data())
def test_odd_pairs_go_through_payloads(case: Any, data: st.DataObject) -> None:
    """Another version byte, an empty key or value, no value, a damaged row: same bytes or
    error."""
    key, value, pairs = case
    if not pairs:
        return
    at = data.draw(st.integers(0, len(pairs) - 1))
    kb, vb = pairs[at]
    how = data.draw(st.sampled_from(["key byte", "value byte", "empty", "mutate", "none"]))
    if how == "key byte":
        kb = bytes([data.draw(st.integers(1, 255))]) + kb[1:]
    elif how == "value byte":
        # Not 0: payloads decodes it as Spark's checksummed or prefixed value, or says why not.
        vb = bytes([data.draw(st.integers(1, 255))]) + vb[1:]
    elif how == "empty":
        kb, vb = (b"", vb) if data.draw(st.booleans()) else (kb, b"")
    elif how == "mutate":
        vb = b"\x00" + _mutate_row(vb[1:], data)
    pairs[at] = (kb, None if how == "none" else vb)  # type: ignore[assignment]
    codec = codec_of(key, value)
    assert compiled_blob(codec, pairs, "UTC") == python_blob(codec, pairs, "UTC")
