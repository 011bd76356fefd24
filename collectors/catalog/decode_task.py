"""One store partition at one batch decoded into a Parquet file: what a Spark executor runs
for ``stateglass sql --engine spark`` (:mod:`.spark_decoding` plans it on the driver).

The executor holds the partition's files in memory (:class:`MemoryFileSystem`, read by the
cluster's Hadoop connectors), rebuilds the state or the batch's changes with the store reader
the local session uses, turns the rows into Arrow with the same decoders
(:func:`partition_tables`, :func:`row_chunks`) and writes them, in the table's exact Arrow
schema, where the driver reads them back. No DuckDB here: executors need not have it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from stateglass.collectors.checkpoints.state_reader import decode_error
from stateglass.collectors.fs import FileInfo, FileSystem
from stateglass.collectors.stores import StoreContext, StoreReader, open_store
from stateglass.parsers.errors import ParseError
from stateglass.parsers.state_arrow import (
    TextForm,
    change_columns,
    constant_column,
    partition_tables,
    plain_text,
    row_chunks,
)
from stateglass.parsers.state_rows import RowCodec, StoreSpec

if TYPE_CHECKING:
    import pyarrow as pa

CHUNK_ROWS = 65_536
Kind = Literal["state", "changes"]


@dataclass(frozen=True)
class DecodeTask:
    """Everything an executor needs to decode ``partition`` of one view of a store at some
    batches: ``state`` (its rows then) or ``changes`` (what the batch wrote), each batch
    into its own ``target`` (a path or URL pyarrow writes) in ``schema``. One task reads the
    partition's files once for all its batches."""

    kind: Kind
    provider: str
    store_dir: str
    store_files: tuple[FileInfo, ...]
    sst_files: tuple[FileInfo, ...] | None
    spec: StoreSpec
    partition: int
    batches: tuple[tuple[int, str], ...]  # (batch id, target)
    schema: pa.Schema
    codec: str = "lz4"
    row_checksum: bool = False
    merge_delimiter: bytes = b","
    unique_ids: dict[int, str] = field(default_factory=dict)
    text_form: TextForm = plain_text


def run_decode(task: DecodeTask, fs: FileSystem) -> list[tuple[str, int]]:
    """Decode ``task`` from ``fs`` into its Parquet files; ``(target, rows)`` of each."""
    ctx = StoreContext(
        fs=fs,
        store_dir=task.store_dir,
        files=task.store_files,
        codec=task.codec,
        row_checksum=task.row_checksum,
        merge_delimiter=task.merge_delimiter,
        unique_ids=task.unique_ids,
    )
    reader = open_store(ctx, task.provider)
    codec = RowCodec(task.spec)
    return [
        (target, _write(task, _pieces(task, reader, codec, batch), target))
        for batch, target in task.batches
    ]


def _write(task: DecodeTask, pieces: Iterator[pa.Table], target: str) -> int:
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    target_fs, path = pafs.FileSystem.from_uri(target)
    rows = 0
    with pq.ParquetWriter(path, task.schema, filesystem=target_fs) as out:
        try:
            for piece in pieces:
                table = piece.select(task.schema.names).cast(task.schema)
                out.write_table(table)
                rows += table.num_rows
        except ParseError as exc:
            raise decode_error(task.store_dir, exc) from exc
    return rows


def _pieces(
    task: DecodeTask, reader: StoreReader, codec: RowCodec, batch: int
) -> Iterator[pa.Table]:
    import pyarrow as pa

    version = batch + 1
    if task.kind == "changes":
        rows = (
            (batch, kind, *row, task.partition)
            for change_type, key, value in reader.changes(version)
            for kind, row in codec.change_rows(change_type, key, value)
        )
        yield from row_chunks(change_columns(codec), rows, task.text_form, CHUNK_ROWS)
        return
    items = list(reader.load(version))
    for piece in partition_tables(codec, task.partition, items, task.text_form, CHUNK_ROWS):
        yield piece.append_column("batch_id", constant_column(batch, piece.num_rows, pa.int64()))
