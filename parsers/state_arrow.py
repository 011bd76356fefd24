"""State rows as Arrow: the columns Spark's reader returns, and one partition's items as tables.

The glue between a store's :class:`RowCodec` and :mod:`parsers.columnar`. Plain key/value
stores of UnsafeRows go from bytes to Arrow a column at a time (:func:`columnar_partition`);
every other shape, and partitions with a row only the Python decoder reads, go through the
decoded rows (:func:`row_table`). Both give the same table. ``state --format parquet`` and
the SQL catalog read through here.

Example::

    if columnar_supported(codec):
        table = columnar_partition(codec, partition, items)  # None: decode row by row
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from stateglass.parsers.arrow_types import arrow_type, has_text_form, unique_names
from stateglass.parsers.sparktypes import ArrayType, AtomicType, DataType, MapType, StructType
from stateglass.parsers.state_rows import Column, Row, RowCodec

try:
    from stateglass.parsers import _speedups
except ImportError:  # not built, or STATEGLASS_PURE=1: pyarrow builds the arrays from the list
    _speedups = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import pyarrow as pa
    from typing_extensions import Buffer

    # A compiled merge's rows: (count, key buffers, value buffers or the values' fields).
    Merged = tuple[
        int,
        tuple[Buffer, Buffer] | None,
        tuple[Buffer, Buffer] | list[tuple[Buffer, Buffer | None, int, None]] | None,
    ]

# A type without an Arrow counterpart (``has_text_form``) -> its value as Spark's JSON text.
TextForm = Callable[[DataType], Callable[[Any], Any]]
ArrowValue = Callable[[Any], Any]

PARTITION_ID: Column = ("partition_id", AtomicType("integer"))
CHANGE_HEAD: tuple[Column, ...] = (
    ("batch_id", AtomicType("long")),
    ("change_type", AtomicType("string")),
)


def state_columns(codec: RowCodec) -> tuple[Column, ...]:
    """Every column of a state row, as Spark's reader returns them."""
    return (*codec.columns, PARTITION_ID)


def change_columns(codec: RowCodec) -> tuple[Column, ...]:
    """Every column of a change-feed row, as Spark's ``readChangeFeed`` returns them."""
    return (*CHANGE_HEAD, *codec.change_columns, PARTITION_ID)


def arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    """The Arrow schema of ``columns`` (the one type mapping, :func:`arrow_type`)."""
    import pyarrow as pa

    return pa.schema([(name, arrow_type(dt)) for name, dt in columns])


def plain_text(dt: DataType) -> ArrowValue:
    """A text form with no Spark rendering at hand: ``str`` of the decoded value."""
    return lambda v: json.dumps(v, default=str)


def arrow_value(dt: DataType, text_form: TextForm = plain_text) -> ArrowValue:
    """Turn a value decoded by :mod:`stateglass.parsers.unsaferow` into what Arrow takes for
    ``dt``; types without an Arrow counterpart go through ``text_form``."""
    if isinstance(dt, StructType):
        names = unique_names(dt.names)
        convs = [arrow_value(f.data_type, text_form) for f in dt.fields]
        items = list(zip(names, convs, strict=True))
        return lambda row: (
            None
            if row is None
            else {n: None if v is None else c(v) for (n, c), v in zip(items, row, strict=True)}
        )
    if isinstance(dt, ArrayType):
        elem = arrow_value(dt.element_type, text_form)
        return lambda xs: None if xs is None else [None if x is None else elem(x) for x in xs]
    if isinstance(dt, MapType):
        key = arrow_value(dt.key_type, text_form)
        value = arrow_value(dt.value_type, text_form)
        return lambda pairs: (
            None if pairs is None else [(key(k), None if v is None else value(v)) for k, v in pairs]
        )
    if has_text_form(dt):
        return text_form(dt)
    return lambda v: v


def row_table(
    columns: Sequence[Column], rows: Iterable[Row], text_form: TextForm = plain_text
) -> pa.Table:
    """``rows`` (in ``columns`` order) as one Arrow table."""
    import pyarrow as pa

    converts = [arrow_value(dt, text_form) for _, dt in columns]
    values: list[list[Any]] = [[] for _ in columns]
    for row in rows:
        for column, convert, value in zip(values, converts, row, strict=True):
            column.append(None if value is None else convert(value))
    arrays = [
        pa.array(column, type=arrow_type(dt))
        for (_, dt), column in zip(columns, values, strict=True)
    ]
    return pa.table(arrays, names=[name for name, _ in columns])


def row_chunks(
    columns: Sequence[Column],
    rows: Iterable[Row],
    text_form: TextForm = plain_text,
    chunk_rows: int = 65_536,
) -> Iterator[pa.Table]:
    """``rows`` as tables of at most ``chunk_rows`` rows: memory bounded by a chunk."""
    chunk: list[Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= chunk_rows:
            yield row_table(columns, chunk, text_form)
            chunk = []
    if chunk:
        yield row_table(columns, chunk, text_form)


def columnar_supported(codec: RowCodec) -> bool:
    """Whether :func:`columnar_partition` can read this store's rows."""
    from stateglass.parsers.columnar import supported

    return (
        codec.raw_capable
        and not codec.grouped
        and [name for name, _ in codec.columns] == ["key", "value"]
        and supported(codec.key_schema)
        and supported(codec.value_schema)
    )


def payload_arrays(
    codec: RowCodec, items: Sequence[tuple[bytes, bytes]], columns: Collection[str] | None = None
) -> tuple[pa.Array | None, pa.Array | None, int] | None:
    """The key and value UnsafeRows of the items that give rows, as two binary arrays (None
    for one of ``key``/``value`` not among ``columns``), and the number of those rows."""
    import pyarrow as pa

    want_key = columns is None or "key" in columns
    want_value = columns is None or "value" in columns
    if codec.spec.provider == "hdfs":
        # Every item is a row: only the columns that are read are built.
        return (
            _binary_column(items, 0) if want_key else None,
            _binary_column(items, 1) if want_value else None,
            len(items),
        )
    spec = codec.spec
    if spec.cf_id is None and not spec.row_checksum:
        # One column family, no checksums: when every pair starts with encoding version 0
        # on both sides (each cut checks them all), every pair is a row, its payloads past
        # that byte, a column copied in C. Neither column read: keys are cut for the check.
        cut = {
            index: _stripped_column(items, index)
            for index, wanted in ((0, want_key or not want_value), (1, want_value))
            if wanted
        }
        if None not in cut.values():
            return (cut[0] if want_key else None), cut.get(1), len(items)
    payloads = codec.payloads
    keys, values = [], []
    for k, v in items:
        pair = payloads(k, v)
        if pair is None:
            continue  # another column family's key
        if pair[1] is None:
            return None
        keys.append(pair[0])
        values.append(pair[1])
    return (
        pa.array(keys, type=pa.large_binary()) if want_key else None,
        pa.array(values, type=pa.large_binary()) if want_value else None,
        len(keys),
    )


def _binary_column(items: Sequence[tuple[bytes, bytes]], index: int) -> pa.Array:
    """Item ``index`` (0: key, 1: value) of every pair, as one large_binary array."""
    import pyarrow as pa

    compiled = getattr(_speedups, "binary_column", None)
    buffers = compiled(items, index) if compiled is not None and isinstance(items, list) else None
    if buffers is None:
        return pa.array([item[index] for item in items], type=pa.large_binary())
    return _large_binary(len(items), buffers)


def _stripped_column(items: Sequence[tuple[bytes, bytes]], index: int) -> pa.Array | None:
    """Item ``index`` of every pair past its leading version byte 0, as one large_binary
    array; None without the compiled loop or if some pair does not start so on both sides
    (:meth:`RowCodec.payloads` then judges each pair)."""
    compiled = getattr(_speedups, "binary_column", None)
    if compiled is None or not isinstance(items, list):
        return None
    buffers = compiled(items, index, True)
    return None if buffers is None else _large_binary(len(items), buffers)


def _large_binary(rows: int, buffers: tuple[Buffer, Buffer]) -> pa.Array:
    """A large_binary array of ``rows`` over int64 ``offsets`` and ``data``, not copied."""
    import pyarrow as pa

    offsets, data = buffers
    return pa.Array.from_buffers(
        pa.large_binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def constant_column(value: int, count: int, int_type: pa.DataType) -> pa.Array:
    """``count`` copies of ``value`` as a column of the signed integer type ``int_type`` (a
    partition or batch id beside decoded rows), with no validity buffer.

    Built from bytes: ``pa.array`` of a NumPy array imports ``numpy.ma`` (20 ms of a short
    query's start-up) and ``pa.repeat`` of a scalar asks pyarrow's pandas shim, which loads
    pandas in a process that has not."""
    import pyarrow as pa

    width = int_type.byte_width
    data = value.to_bytes(width, sys.byteorder, signed=True) * count
    return pa.Array.from_buffers(int_type, count, [None, pa.py_buffer(data)])


def columnar_partition(
    codec: RowCodec,
    partition: int,
    items: Sequence[tuple[bytes, bytes]],
    columns: Collection[str] | None = None,
) -> pa.Table | None:
    """``key``, ``value`` and ``partition_id`` of every row of one partition; of ``key`` and
    ``value``, only those among ``columns`` (None: both), the others never decoded.

    None when some row needs the Python decoder (:func:`stateglass.parsers.columnar.decode_struct`).
    """
    import pyarrow as pa

    try:
        arrays = payload_arrays(codec, items, columns)
    except pa.ArrowException:
        return None  # past what one Arrow array holds: see _columnar_table
    return None if arrays is None else _columnar_table(codec, partition, *arrays)


def chain_tables(
    codec: RowCodec,
    partition: int,
    snapshot: bytes | None,
    deltas: Sequence[bytes],
    chunk_rows: int = 65_536,
    columns: Collection[str] | None = None,
) -> list[pa.Table] | None:
    """Every row of one partition of an HDFS store, from the decompressed files of its chain
    (a snapshot or None, then the deltas: ``StateSource.chain_data``), as
    :func:`partition_tables` gives them, ``chunk_rows`` rows a table.

    The files are merged and cut into key and value columns in C, with no Python object a
    row and without the GIL; None where that does not apply (no compiled module, a codec
    :func:`columnar_supported` refuses, a stream the merge finds unclean, a row only the
    Python decoder reads): :func:`partition_tables` over the loaded items then gives the
    rows, or names the problem.
    """
    compiled = getattr(_speedups, "chain_columns", None)
    if compiled is None or codec.spec.provider != "hdfs" or not columnar_supported(codec):
        return None
    want_key = columns is None or "key" in columns
    want_value = columns is None or "value" in columns
    merged = _merged_values_decoded(
        compiled, (snapshot, list(deltas), want_key, want_value), codec if want_value else None
    )
    return None if merged is None else _merged_tables(codec, partition, merged, chunk_rows)


def run_tables(
    codec: RowCodec,
    partition: int,
    runs: Sequence[Sequence[bytes]],
    chunk_rows: int = 65_536,
    columns: Collection[str] | None = None,
) -> list[pa.Table] | None:
    """Every row of one partition of a RocksDB store, from the decoded data blocks of the
    tables of its version (``StateSource.sorted_runs``), as :func:`partition_tables` gives
    them, ``chunk_rows`` rows a table.

    The tables are merged by key and sequence number in C, as a RocksDB read of the newest
    state is, and every row's payloads past their encoding version byte cut into columns,
    with no Python object a row and without the GIL. None where that does not apply (no
    compiled module, virtual column families or row checksums, a codec
    :func:`columnar_supported` refuses, an entry the merge does not resolve alone such as a
    merge operand, a pair not starting with version 0): RocksDB's own read then gives the
    items.
    """
    compiled = getattr(_speedups, "runs_columns", None)
    if compiled is None or not runs_mergeable(codec):
        return None
    want_key = columns is None or "key" in columns
    want_value = columns is None or "value" in columns
    merged = _merged_values_decoded(
        compiled,
        ([list(run) for run in runs], want_key, want_value, True),
        codec if want_value else None,
    )
    return None if merged is None else _merged_tables(codec, partition, merged, chunk_rows)


def _merged_values_decoded(
    merge: Callable[..., Merged | None], args: tuple[Any, ...], codec: RowCodec | None
) -> Merged | None:
    """``merge(*args)``, a compiled merge; where ``codec``'s value rows are all fixed-width
    fields (an aggregate's), the values decoded into their fields as the merge takes them.
    A value row too short for its fields refuses that: the merge of whole rows follows, and
    the rows' own decoder judges it (or that merge is refused too)."""
    from stateglass.parsers.columnar import fixed_field_sizes

    sizes = None if codec is None else fixed_field_sizes(codec.value_schema)
    if sizes is not None:
        merged = merge(*args, sizes)
        if merged is not None:
            return merged
    return merge(*args)


def runs_mergeable(codec: RowCodec) -> bool:
    """Whether :func:`run_tables` can read this store's rows from merged tables: rows in
    RocksDB's layout with one column family and no row checksums, which the columnar
    decoder reads (a caller asks before it reads the tables)."""
    spec = codec.spec
    return (
        getattr(_speedups, "runs_columns", None) is not None
        and spec.provider != "hdfs"
        and spec.cf_id is None
        and not spec.row_checksum
        and columnar_supported(codec)
    )


def _merged_tables(
    codec: RowCodec, partition: int, merged: Merged, chunk_rows: int
) -> list[pa.Table] | None:
    """The tables of a partition from the key and value buffers a compiled merge made (the
    values as rows, or as their fields' columns), ``chunk_rows`` rows a table; None when a
    row needs the Python decoder."""
    from stateglass.parsers.columnar import struct_of_fields

    rows, key_buffers, value_buffers = merged
    keys = None if key_buffers is None else _large_binary(rows, key_buffers)
    values: pa.Array | None = None
    if isinstance(value_buffers, list):
        values = struct_of_fields(codec.value_schema, rows, value_buffers)
    elif value_buffers is not None:
        values = _large_binary(rows, value_buffers)
    tables = []
    for start in range(0, rows, chunk_rows):
        n = min(chunk_rows, rows - start)
        table = _columnar_table(
            codec,
            partition,
            None if keys is None else keys.slice(start, n),
            None if values is None else values.slice(start, n),
            n,
        )
        if table is None:
            return None
        tables.append(table)
    return tables


def _columnar_table(
    codec: RowCodec, partition: int, keys: pa.Array | None, values: pa.Array | None, count: int
) -> pa.Table | None:
    """The table of :func:`columnar_partition` from the key and value UnsafeRows (or
    values a merge decoded already: a struct array)."""
    import pyarrow as pa

    from stateglass.parsers.columnar import decode_struct

    try:
        made = [
            (name, rows if pa.types.is_struct(rows.type) else decode_struct(schema, rows))
            for name, schema, rows in (
                ("key", codec.key_schema, keys),
                ("value", codec.value_schema, values),
            )
            if rows is not None
        ]
    except pa.ArrowException:
        # Past what one Arrow array holds (2 GiB of strings, 32-bit list offsets): the row
        # path builds the same table in chunks.
        return None
    if any(column is None for _, column in made):
        return None
    pid = constant_column(partition, count, pa.int32())
    return pa.table(
        [column for _, column in made] + [pid],
        names=[name for name, _ in made] + ["partition_id"],
    )


def partition_tables(
    codec: RowCodec,
    partition: int,
    items: Sequence[tuple[bytes, bytes]],
    text_form: TextForm = plain_text,
    chunk_rows: int = 65_536,
    columns: Collection[str] | None = None,
) -> Iterator[pa.Table]:
    """Every state row of one partition (:func:`state_columns`), a chunk at a time.

    ``columns``: the columns the caller reads (None: all). The columnar decoder then leaves
    out ``key`` or ``value`` if not among them; the row path still makes every column."""
    if columnar_supported(codec):
        for start in range(0, max(len(items), 1), chunk_rows):
            chunk = items[start : start + chunk_rows]
            table = columnar_partition(codec, partition, chunk, columns)
            if table is None:
                break
            if table.num_rows:
                yield table
        else:
            return
        items = items[start:]  # from the chunk the columnar decoder left to the row path
    rows = (
        (*row, partition)
        for row in (
            codec.partition_rows(items)
            if codec.grouped
            else (r for k, v in items for r in codec.rows(k, v))
        )
    )
    yield from row_chunks(state_columns(codec), rows, text_form, chunk_rows)
