"""The columnar decoder (``parsers/columnar.py``) gives the Parquet output of the Python one.

The Python decoder is the specification: for any rows of any schema the columnar decoder
accepts, the Parquet written from its arrays reads back bit for bit as the Parquet written
from the Python decoder's values (``stateglass.app.render.arrow_values.arrow_value``); for rows
it refuses (None), the Python decoder is what runs. ``state --format parquet`` is checked end
to end the same way, through a real sink, on both providers.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.app.errors import AppError
from stateglass.app.output import ParquetSink
from stateglass.app.render.arrow_values import arrow_value
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.parsers import columnar
from stateglass.parsers.arrow_types import arrow_type
from stateglass.parsers.errors import ParseError
from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DecimalType,
    StructField,
    StructType,
)
from stateglass.parsers.state_arrow import (
    chain_tables,
    columnar_partition,
    columnar_supported,
    partition_tables,
)
from stateglass.parsers.state_rows import RowCodec, StoreSpec
from stateglass.parsers.unsaferow import row_decoder
from stateglass.parsers.unsafewriter import encode_row
from tests.conftest import SAMPLES
from tests.parsers.compiled import _mutate_row
from tests.parsers.row_strategies import SCHEMAS, draw_row, struct_types
from tests.parsers.state_encoders import encode_records

FAST = settings(max_examples=120, deadline=None, database=None)
COLUMNAR_SCHEMAS = [s for s in SCHEMAS if columnar.supported(s)]
schemas = st.one_of(
    st.sampled_from(COLUMNAR_SCHEMAS),
    struct_types(rich=True).filter(columnar.supported),
)


def _bits(array: Any) -> Any:
    """Floats as their bit patterns, so that NaNs compare (and their payloads count)."""
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([_bits(c) for c in array.chunks], type=_bits_type(array.type))
    if pa.types.is_map(array.type):
        keys, items = _bits(array.keys), _bits(array.items)
        return pa.MapArray.from_arrays(array.offsets, keys, items, mask=array.is_null())
    if pa.types.is_list(array.type):
        values = _bits(array.flatten())
        return pa.ListArray.from_arrays(array.offsets, values, mask=array.is_null())
    if pa.types.is_struct(array.type):
        children = [_bits(array.field(i)) for i in range(array.type.num_fields)]
        names = [f.name for f in array.type]
        if not children:
            return array
        return pa.StructArray.from_arrays(children, names=names, mask=array.is_null())
    if array.type == pa.float32():
        return array.view(pa.int32())
    if array.type == pa.float64():
        return array.view(pa.int64())
    return array


def _bits_type(t: Any) -> Any:
    if pa.types.is_map(t):
        return pa.map_(_bits_type(t.key_type), _bits_type(t.item_type))
    if pa.types.is_list(t):
        return pa.list_(_bits_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _bits_type(f.type)) for f in t])
    return {pa.float32(): pa.int32(), pa.float64(): pa.int64()}.get(t, t)


def _read_back(table: pa.Table) -> Any:
    """The table as Parquet gives it back, or why Parquet cannot hold it (empty structs)."""
    buf = io.BytesIO()
    try:
        pq.write_table(table, buf)
    except pa.ArrowNotImplementedError as exc:
        return str(exc)
    buf.seek(0)
    back = pq.read_table(buf)
    return pa.table([_bits(c) for c in back.columns], names=back.column_names)


def _python_column(schema: StructType, rows: list[bytes]) -> pa.Array:
    decode, convert = row_decoder(schema), arrow_value(schema)
    return pa.array([convert(decode(r)) for r in rows], type=arrow_type(schema))


def _assert_same_parquet(ours: pa.Array, theirs: pa.Array) -> None:
    assert ours.type == theirs.type
    a, b = _read_back(pa.table({"c": ours})), _read_back(pa.table({"c": theirs}))
    if isinstance(b, str):
        assert a == b
    else:
        assert a.equals(b), (a.to_pylist(), b.to_pylist())


@st.composite
def rows_of(draw: st.DrawFn, schema_strategy: st.SearchStrategy[StructType] = schemas) -> Any:
    schema = draw(schema_strategy)
    rows = [encode_row(schema, draw_row(draw, schema)) for _ in range(draw(st.integers(0, 6)))]
    return schema, rows


@FAST
@given(case=rows_of())
def test_columns_agree_with_the_python_decoder(case: Any) -> None:
    schema, rows = case
    ours = columnar.decode_struct(schema, pa.array(rows, type=pa.binary()))
    if ours is None:
        # Only where the Python path fails too: a decimal one past its precision (the
        # strategy can round up to 10**p), which Arrow refuses.
        with pytest.raises(pa.ArrowInvalid, match="precision"):
            _python_column(schema, rows)
        return
    assert ours.type == arrow_type(schema)
    _assert_same_parquet(ours, _python_column(schema, rows))


FLAT_TYPES = [*columnar._FIXED, "string", "binary"]
flat_structs = st.lists(st.sampled_from(FLAT_TYPES), min_size=1, max_size=70).map(
    lambda names: StructType(
        tuple(StructField(f"f{i}", AtomicType(n)) for i, n in enumerate(names))
    )
)


@FAST
@given(
    schema=flat_structs,
    data=st.data(),
    count=st.integers(0, 20),
    skip=st.integers(0, 3),
)
def test_structs_of_fixed_width_and_string_fields_agree_with_the_python_decoder(
    schema: StructType, data: st.DataObject, count: int, skip: int
) -> None:
    """Every field fixed-width or a string or binary (an aggregate's value, a key of names):
    copied row by row in C, nulls and all, from a slice of the rows as from the whole (up
    to 64 fields; more: numpy)."""
    rows = [encode_row(schema, draw_row(data.draw, schema)) for _ in range(count + skip)]
    sliced = pa.array(rows, type=pa.large_binary()).slice(skip)
    _, offsets, payload = sliced.buffers()
    compiled = columnar._flat_fields(schema, offsets, payload, sliced.offset, len(sliced))
    if len(schema.fields) <= 64 and payload is not None:
        assert compiled is not None
    ours = columnar.decode_struct(schema, sliced)
    assert ours is not None
    _assert_same_parquet(ours, _python_column(schema, rows[skip:]))


@settings(max_examples=60, deadline=None, database=None)
@given(field=st.integers(0, 2), past=st.integers(49, 1 << 20), high=st.booleans())
def test_a_string_past_its_row_is_refused_by_the_compiled_loop(
    field: int, past: int, high: bool
) -> None:
    """A span that runs past its row (by its size, or by an offset 2**30 bytes on) is not
    read from the next row: the loop refuses, and so does the numpy path. (The row is 56
    bytes: a span 49 bytes longer ends past it from any slot.)"""
    schema = StructType(tuple(StructField(f"s{i}", AtomicType("string")) for i in range(3)))
    row = bytearray(encode_row(schema, ("a", "bc", "def")))
    slot = 8 + 8 * field
    span = int.from_bytes(row[slot : slot + 8], "little")
    if high:
        span += 1 << 62
    else:
        span += past
    row[slot : slot + 8] = span.to_bytes(8, "little")
    rows = pa.array([bytes(row), encode_row(schema, ("x", "y", "z"))], type=pa.large_binary())
    _, offsets, payload = rows.buffers()
    assert columnar._flat_fields(schema, offsets, payload, 0, 2) is None
    assert columnar.decode_struct(schema, rows) is None


@FAST
@given(case=rows_of(), data=st.data())
def test_damaged_rows_go_to_the_python_decoder_or_agree(case: Any, data: st.DataObject) -> None:
    schema, rows = case
    if not rows:
        return
    at = data.draw(st.integers(0, len(rows) - 1))
    rows[at] = _mutate_row(rows[at], data)
    ours = columnar.decode_struct(schema, pa.array(rows, type=pa.large_binary()))
    if ours is None:
        return  # the Python decoder runs: it repairs, raises, or Arrow refuses its values
    _assert_same_parquet(ours, _python_column(schema, rows))


@settings(max_examples=60, deadline=None, database=None)
@given(raw=st.lists(st.binary(max_size=12), min_size=1, max_size=3), data=st.data())
def test_malformed_utf8_is_left_to_the_python_decoder(
    raw: list[bytes], data: st.DataObject
) -> None:
    schema = StructType(tuple(StructField(f"s{i}", AtomicType("string")) for i in range(3)))
    row = list(raw) + [b""] * (3 - len(raw))
    bad = data.draw(st.sampled_from([b"\xed\xa0\x80", b"\xc0\x80", b"\xff", b"\xe2\x82"]))
    row[data.draw(st.integers(0, 2))] = data.draw(st.binary(max_size=6)) + bad
    encoded = encode_row(
        StructType(tuple(StructField(f.name, AtomicType("binary")) for f in schema.fields)),
        tuple(row),
    )
    assert columnar.decode_struct(schema, pa.array([encoded])) is None


def test_decimals_wider_than_their_type_are_left_to_python() -> None:
    narrow = StructType((StructField("d", DecimalType(4, 2)),))
    wide = StructType((StructField("d", DecimalType(30, 2)),))
    from decimal import Decimal

    for schema_written, value in (
        (StructType((StructField("d", DecimalType(18, 2)),)), "123456.78"),
        (wide, "1" * 28 + ".25"),
    ):
        row = encode_row(schema_written, (Decimal(value),))
        target = (
            narrow
            if schema_written is not wide
            else StructType((StructField("d", DecimalType(20, 2)),))
        )
        assert columnar.decode_struct(target, pa.array([row])) is None


def test_unsupported_schemas_are_refused_up_front() -> None:
    schema = StructType((StructField("xs", ArrayType(AtomicType("interval"))),))
    assert not columnar.supported(schema)
    with pytest.raises(ValueError, match="not a columnar schema"):
        columnar.decode_struct(schema, pa.array([b""]))


# ---------------------------------------------------------------------------- the sink


def _write(
    codec: RowCodec, partitions: list[list[tuple[bytes, bytes]]], path: Path, fast: bool
) -> Any:
    """What ``state --format parquet`` writes: the table read back, or the error it raises."""
    try:
        with ParquetSink(codec, "UTC", str(path)) as sink:
            sink.columnar = sink.columnar and fast
            for partition, items in enumerate(partitions):
                sink.write_partition(partition, iter(items))
    except (ParseError, AppError) as exc:
        return type(exc), str(exc).replace(str(path), "OUT")
    return _read_back(pq.read_table(path))


@st.composite
def stores(draw: st.DrawFn) -> Any:
    key_schema, value_schema = draw(schemas), draw(schemas)
    provider = draw(st.sampled_from(["hdfs", "rocksdb"]))
    prefix = b"" if provider == "hdfs" else b"\x00"
    partitions = []
    for _ in range(draw(st.integers(0, 3))):
        items = []
        for _ in range(draw(st.integers(0, 4))):
            kb = encode_row(key_schema, draw_row(draw, key_schema))
            vb = encode_row(value_schema, draw_row(draw, value_schema))
            items.append((prefix + kb, prefix + vb))
        partitions.append(items)
    spec = StoreSpec(provider=provider, key_schema=key_schema, value_schema=value_schema)
    return RowCodec(spec), partitions


@settings(max_examples=50, deadline=None, database=None)
@given(store=stores(), data=st.data())
def test_parquet_output_is_the_python_paths(
    store: Any, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    codec, partitions = store
    assert columnar_supported(codec)
    if partitions and partitions[-1] and data.draw(st.booleans()):
        # One damaged row: that partition goes row by row, the others stay columnar.
        k, v = partitions[-1][0]
        partitions[-1][0] = (k, v[:1] + _mutate_row(v[1:], data))
    tmp = tmp_path_factory.mktemp("pq")
    fast = _write(codec, partitions, tmp / "fast.parquet", fast=True)
    slow = _write(codec, partitions, tmp / "slow.parquet", fast=False)
    if isinstance(slow, tuple):
        assert fast == slow
    else:
        assert isinstance(fast, pa.Table)
        assert fast.equals(slow), (fast.to_pylist(), slow.to_pylist())


@FAST
@given(
    key_schema=schemas,
    value_schema=schemas,
    data=st.data(),
    chunk_rows=st.integers(1, 5),
)
def test_a_chain_cut_into_chunks_decodes_as_its_items(
    key_schema: StructType,
    value_schema: StructType,
    data: st.DataObject,
    chunk_rows: int,
) -> None:
    """``chain_tables`` decodes slices of the merged columns (chunks past the first start
    mid-buffer): the same tables as the loaded items through ``partition_tables``."""
    rows = [
        (
            encode_row(key_schema, draw_row(data.draw, key_schema)),
            encode_row(value_schema, draw_row(data.draw, value_schema)),
        )
        for _ in range(data.draw(st.integers(0, 12)))
    ]
    merged: dict[bytes, bytes] = {}
    for k, v in rows:
        merged[k] = v
    codec = RowCodec(StoreSpec(provider="hdfs", key_schema=key_schema, value_schema=value_schema))
    got = chain_tables(codec, 1, None, [encode_records(rows)], chunk_rows)
    if got is None:
        # A row only the Python decoder reads (a decimal past its precision): the caller
        # then takes the item path, as columnar_partition would.
        assert columnar_partition(codec, 1, list(merged.items())) is None
        return
    expected = list(partition_tables(codec, 1, list(merged.items()), chunk_rows=chunk_rows))
    assert [t.num_rows for t in got] == [t.num_rows for t in expected]
    for table, want in zip(got, expected, strict=True):
        assert _bits(table.column("key")).equals(_bits(want.column("key")))
        assert _bits(table.column("value")).equals(_bits(want.column("value")))


# ------------------------------------------------------------- real Spark checkpoints


def _sample_stores() -> list[Any]:
    out = []
    for cp in sorted(p for p in SAMPLES.glob("spark-*/*") if (p / "state").is_dir()):
        for store in Checkpoint.open(str(cp)).stores():
            # transformWithState is read a state variable at a time (timers are not rows).
            names = [v.name for v in store.state_variables if v.kind != "TimerState"]
            for var in names or [None]:
                label = f"{cp.parent.name}/{cp.name}/{store.operator_id}/{store.store_name}"
                request = StateRequest(store.operator_id, store.store_name, state_var=var)
                out.append(pytest.param(str(cp), request, id=label + (f"/{var}" if var else "")))
    return out


@pytest.mark.parametrize(("path", "request_"), _sample_stores())
def test_sample_checkpoints_parquet_is_the_python_paths(
    path: str, request_: StateRequest, tmp_path: Path
) -> None:
    cp = Checkpoint.open(path)
    source = StateSource(cp, request_)
    version = cp.resolve_batch(None) + 1
    partitions = [source.load_items(p, version) for p in source.partitions]
    fast = _write(source.row_codec, partitions, tmp_path / "fast.parquet", fast=True)
    slow = _write(source.row_codec, partitions, tmp_path / "slow.parquet", fast=False)
    assert isinstance(slow, pa.Table) and slow.num_rows > 0
    assert fast.equals(slow)
    if columnar_supported(source.row_codec):
        # Spark's own rows never need the Python decoder: the columnar path really ran.
        assert all(
            columnar_partition(source.row_codec, 0, items) is not None for items in partitions
        )


def _hdfs_stores() -> list[Any]:
    return [
        p
        for p in _sample_stores()
        if Checkpoint.open(p.values[0])
        .store(p.values[1].operator_id, p.values[1].store_name)
        .provider
        == "hdfs"
    ]


@pytest.mark.parametrize(("path", "request_"), _hdfs_stores())
def test_an_hdfs_chain_gives_the_tables_of_its_loaded_items(
    path: str, request_: StateRequest
) -> None:
    """What the SQL catalog decodes from an HDFS store's files merged in C is what the
    record path decodes from the loaded items, for every column choice, chunk by chunk."""
    cp = Checkpoint.open(path)
    source = StateSource(cp, request_)
    codec = source.row_codec
    version = cp.resolve_batch(None) + 1
    for partition in source.partitions:
        chain = source.chain_data(partition, version)
        assert chain is not None
        items = source.load_items(partition, version)
        for columns in (None, {"value"}, {"key"}, set()):
            merged = chain_tables(codec, partition, *chain, 3, columns)
            if not columnar_supported(codec):
                assert merged is None
                continue
            assert merged is not None
            expected = list(
                partition_tables(codec, partition, items, chunk_rows=3, columns=columns)
            )
            assert [t.num_rows for t in merged] == [t.num_rows for t in expected]
            for got, want in zip(merged, expected, strict=True):
                assert got.equals(want), (got.to_pylist(), want.to_pylist())
