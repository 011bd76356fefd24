"""The lazy tables behind the catalog's views: pyarrow Dataset subclasses DuckDB scans.

duckdb 2.0's Arrow scan calls ``type(obj).scanner(obj, columns=…, filter=…)`` once per scan
of a registered Dataset, with the predicates it pushed down as one Arrow expression
(``docs/design/sql-catalog.md``). So each scan here:

1. resolves its batches afresh, through the query's :class:`QueryScope` (a new commit is
   seen by the next query; the scans of one query agree);
2. keeps only the (partition, batch) pairs the filter allows (:mod:`.pruning`), reading
   nothing to decide;
3. returns a pull-only reader that decodes the pairs in order, a few at once in threads
   (:func:`decoded_ahead`, the session's ``decoders``), only the columns DuckDB reads or its
   filter names (:func:`columns_needed`), applies the filter itself (DuckDB drops a
   predicate it pushed: a source that ignored it would return wrong rows), and projects.
   ``LIMIT 1`` takes one pair (those decoded ahead of it are at most ``decoders``); a
   stopped query starts no further decode.

A source's failure (a purged batch, a corrupt file, the time limit) is kept on the scope,
so the session raises it as it is rather than as DuckDB's wrapped text.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.dataset as ds

from stateglass.collectors.catalog.pruning import (
    TABLE_ID,
    batches_kept,
    first_kept_after,
    pairs_kept,
    selects_batches,
    tables_kept,
)
from stateglass.collectors.catalog.scope import Decoded, QueryScope, SourceCache
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateSource, refuse_repartitions
from stateglass.collectors.checkpoints.state_views import StateView
from stateglass.collectors.errors import MissingVersion, NotFound
from stateglass.collectors.fs import FileSystem
from stateglass.parsers.arrow_types import repeated_names
from stateglass.parsers.sparktypes import StructField, StructType
from stateglass.parsers.state_arrow import (
    TextForm,
    arrow_schema,
    change_columns,
    constant_column,
    row_chunks,
    state_columns,
)

if TYPE_CHECKING:
    import pyarrow.compute as pc

    from stateglass.collectors.catalog.decode_task import Kind
    from stateglass.collectors.catalog.spark_decoding import SparkDecoding

T = TypeVar("T")
R = TypeVar("R")
BATCH_ID = pa.field("batch_id", pa.int64())
CHUNK_ROWS = 65_536

Scopes = Callable[[], QueryScope]
# The columns a scan must make (None: all). A table may make more; the scan drops them.
Needed = frozenset[str] | None
Pieces = Callable[[QueryScope, "pc.Expression | None", Needed], Iterator[pa.Table]]


class Rows:
    """What ``scanner()`` returns: pieces decoded as DuckDB pulls, filtered and projected."""

    def __init__(
        self,
        schema: pa.Schema,
        pieces: Iterator[pa.Table],
        columns: Sequence[str] | None,
        flt: pc.Expression | None,
        scope: QueryScope,
        needed: Needed = None,
    ) -> None:
        self.schema = schema
        # What the pieces are cut to before filtering: the columns read or filtered on.
        self.made = schema if needed is None else pa.schema([f for f in schema if f.name in needed])
        self.pieces = pieces
        self.columns = list(columns) if columns is not None else None
        self.filter = flt
        self.scope = scope

    @property
    def projected_schema(self) -> pa.Schema:
        if self.columns is None:
            return self.schema
        return pa.schema([self.schema.field(c) for c in self.columns])

    def to_reader(self) -> pa.RecordBatchReader:
        out = self.projected_schema
        return pa.RecordBatchReader.from_batches(out, self._batches(out))

    def _batches(self, out: pa.Schema) -> Iterator[pa.RecordBatch]:
        try:
            for table in self.pieces:
                if table.schema.names != self.made.names:
                    table = table.select(self.made.names)
                if not table.schema.equals(self.made):
                    table = table.cast(self.made)
                if self.filter is not None:
                    table = kept_rows(table, self.filter)
                yield from table.select(out.names).to_batches(max_chunksize=CHUNK_ROWS)
        except Exception as exc:
            # DuckDB re-raises it as flattened text; the session raises this one instead.
            # (Not GeneratorExit: DuckDB closing the scan after its own error is no failure.)
            if self.scope.failure is None:
                self.scope.failure = exc
            raise


def kept_rows(table: pa.Table, flt: pc.Expression) -> pa.Table:
    """The rows of ``table`` that ``flt`` keeps (where it is null too, the row goes, as in
    SQL). The predicate is evaluated to a mask first: a state query's filter often keeps
    every row, and such a table is returned as it is, where ``Table.filter`` copies it
    whole (a tenth of a 10M-row aggregate's time)."""
    import pyarrow.acero as acero
    import pyarrow.compute as pc

    mask = (
        acero.Declaration.from_sequence(
            [
                acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
                acero.Declaration("project", acero.ProjectNodeOptions([flt], ["kept"])),
            ]
        )
        # In this thread: Arrow's pool is shared with the decoders, and a hop through it
        # cost more than the predicate on a piece.
        .to_table(use_threads=False)
        .column(0)
    )
    if mask.null_count == 0 and pc.all(mask).as_py() is not False:
        return table
    return table.filter(mask)


class SharedTable(ds.InMemoryDataset):
    """The tables of one Arrow schema, behind one registered source.

    Registering a source costs DuckDB milliseconds, more as there are more, and a fleet of
    one job's checkpoints has hundreds of tables of each schema. So each view reads its
    table by number: ``SELECT * EXCLUDE (_sg_table) FROM _sg_<n> WHERE _sg_table = <k>``.
    DuckDB pushes that constant down, and a scan makes only the tables it keeps (were the
    filter not pushed, a scan would make them all: the right rows, at more cost).
    """

    def __init__(self, schema: pa.Schema, scopes: Scopes) -> None:
        self._schema = schema.append(TABLE_ID)
        super().__init__(self._schema.empty_table())
        self._scopes = scopes
        self._pieces: list[Pieces] = []

    def add(self, pieces: Pieces) -> int:
        """Take one more table's rows; its number for the view's predicate."""
        self._pieces.append(pieces)
        return len(self._pieces) - 1

    def scanner(
        self, columns: Sequence[str] | None = None, filter: pc.Expression | None = None, **_: Any
    ) -> Rows:
        scope = self._scopes()
        kept = tables_kept(self._schema, len(self._pieces), filter)
        needed = columns_needed(self._schema, columns, filter)
        pieces = self._made(kept, scope, filter, needed)
        # A view's own predicate (``_sg_table = k``) alone keeps every row of the tables
        # kept: applying it again would cost a pass over each piece for nothing.
        rows_filter = (
            None if filter is None or _reads_only_table_id(self._schema, filter) else filter
        )
        return Rows(self._schema, pieces, columns, rows_filter, scope, needed)

    def _made(
        self, kept: Sequence[int], scope: QueryScope, flt: pc.Expression | None, needed: Needed
    ) -> Iterator[pa.Table]:
        for number in kept:
            for piece in self._pieces[number](scope, flt, needed):
                ids = constant_column(number, piece.num_rows, pa.int32())
                yield piece.append_column(TABLE_ID, ids)


class StoreTables:
    """The state and change-feed tables of one view of a store (what Spark reads in one go)."""

    def __init__(
        self,
        schema_name: str,
        view: StateView,
        fs: FileSystem,
        sources: SourceCache,
        text_form: TextForm,
        opened: StateSource,
        spark: SparkDecoding | None = None,
        decoders: int = 1,
    ) -> None:
        self.schema_name = schema_name
        self.decoders = decoders
        self.view = view
        self.fs = fs
        self.sources = sources
        self.text_form = text_form
        self.spark = spark
        codec = opened.output_codec
        self.state_schema = arrow_schema(state_columns(codec)).append(BATCH_ID)
        self.change_schema = arrow_schema(change_columns(codec))
        # Structs whose field names repeat (aggregation buffers) have them made unique in
        # the tables; the names Spark gives them, for printing them as Spark does.
        self.repeated_names = repeated_names(
            StructType(tuple(StructField(n, dt) for n, dt in state_columns(codec)))
        )

    def _source(self, scope: QueryScope) -> tuple[Checkpoint, StateSource]:
        cp = scope.checkpoint(self.view.checkpoint, self.fs)
        return cp, self.sources.get(self.view, cp)

    def state_pieces(self, table: str) -> Pieces:
        """The rows of the state table ``table``: the last committed batch, or the batches
        a pushed predicate on ``batch_id`` picks."""

        def pieces(
            scope: QueryScope, flt: pc.Expression | None, needed: Needed
        ) -> Iterator[pa.Table]:
            cp, source = self._source(scope)
            batches = self._state_batches(cp, source, flt)
            if selects_batches(self.state_schema, flt):
                scope.batch_picked.add(f"{self.schema_name}.{table}")
            else:
                scope.last_batch_read.append((f"{self.schema_name}.{table}", batches[0]))
            pairs = [(p, b) for b in batches for p in source.partitions_for(b)]
            kept = pairs_kept(self.state_schema, pairs, flt)
            if self.spark is not None:
                yield from self._from_spark("state", table, scope, cp, source, kept, needed)
                return
            decoded = self.sources.decoded
            where = f"{self.schema_name}.{table}"

            def made(pair: tuple[int, int]) -> tuple[list[pa.Table], bool]:
                partition, batch = pair
                scope.check_time(f"{where} partition {partition}")
                pieces = self._decode(source, partition, batch, needed)
                if not decoded.max_bytes:
                    # A key is a listing of the partition (a LIST on an object store): a
                    # cache that keeps nothing (a one-shot query's) needs none.
                    return list(pieces), False
                key = decoded.key(self.view, cp, source.store, partition, batch, needed)
                held = decoded.get(key)
                if held is not None:
                    return held, True
                return list(decoded.keep(key, pieces)), False

            for (partition, batch), (tables, held) in zip(
                kept, decoded_ahead(made, kept, self.decoders), strict=True
            ):
                scope.decoded.append(Decoded(self.schema_name, table, partition, batch, held))
                for piece in tables:
                    yield piece
                    scope.check_time(f"{where} partition {partition}")

        return pieces

    def _decode(
        self, source: StateSource, partition: int, batch: int, needed: Needed
    ) -> Iterator[pa.Table]:
        for piece in source.tables(partition, batch + 1, self.text_form, CHUNK_ROWS, needed):
            yield _with_batch(piece, batch)

    def _state_batches(
        self, cp: Checkpoint, source: StateSource, flt: pc.Expression | None
    ) -> list[int]:
        last = cp.resolve_batch(None)  # no batch committed yet: says so, as `state` does
        if not selects_batches(self.state_schema, flt):
            return [last]
        wanted = batches_kept(self.state_schema, range(last + 1), flt)
        retained = {v - 1 for v in source.readable_versions()}
        batches = [b for b in wanted if b in retained]
        if not batches:
            _refuse_unreadable(cp, source, self.state_schema, wanted, last, flt)
        return batches

    def change_pieces(self, table: str) -> Pieces:
        """The rows of the change-feed table ``table``: every retained batch's changes, or
        those of the batches a pushed predicate on ``batch_id`` picks."""

        def pieces(
            scope: QueryScope, flt: pc.Expression | None, needed: Needed
        ) -> Iterator[pa.Table]:
            cp, source = self._source(scope)
            last = cp.resolve_batch(None)
            retained = [v - 1 for v in source.readable_versions()]
            if selects_batches(self.change_schema, flt):
                wanted = batches_kept(self.change_schema, range(last + 1), flt)
                batches = [b for b in wanted if b in set(retained)]
                if not batches:
                    _refuse_unreadable(cp, source, self.change_schema, wanted, last, flt)
            else:
                batches = retained
            if batches:
                refuse_repartitions(cp, batches[0], batches[-1])
            pairs = [(p, b) for p in source.all_partitions() for b in batches]
            held = {b: set(source.partitions_for(b)) for b in batches}
            pairs = [(p, b) for p, b in pairs if p in held[b]]
            kept = pairs_kept(self.change_schema, pairs, flt)
            if self.spark is not None:
                yield from self._from_spark("changes", table, scope, cp, source, kept, needed)
                return
            for partition, batch in kept:
                scope.check_time(f"{self.schema_name}.{table} partition {partition}")
                scope.decoded.append(Decoded(self.schema_name, table, partition, batch))
                yield from self._changes(source, partition, batch)

        return pieces

    def _from_spark(
        self,
        kind: Kind,
        table: str,
        scope: QueryScope,
        cp: Checkpoint,
        source: StateSource,
        pairs: Sequence[tuple[int, int]],
        needed: Needed,
    ) -> Iterator[pa.Table]:
        """The rows of ``pairs`` as Spark decoded them into Parquet (one job for those not
        decoded yet), read back ``needed`` columns only."""
        assert self.spark is not None
        schema = self.state_schema if kind == "state" else self.change_schema
        scope.check_time(f"{self.schema_name}.{table}")
        files = self.spark.files(kind, self.view, cp, source, pairs, schema, self.text_form, scope)
        for (partition, batch), (path, held) in zip(pairs, files, strict=True):
            scope.check_time(f"{self.schema_name}.{table} partition {partition}")
            scope.decoded.append(Decoded(self.schema_name, table, partition, batch, held))
            yield from self.spark.read(path, needed)

    def _changes(self, source: StateSource, partition: int, batch: int) -> Iterator[pa.Table]:
        codec = source.row_codec
        rows = (
            (batch, kind, *row, partition)
            for change_type, key, value in source.changes(partition, batch + 1)
            for kind, row in codec.change_rows(change_type, key, value)
        )
        with source.decoding(partition):
            yield from row_chunks(change_columns(codec), rows, self.text_form, CHUNK_ROWS)


def columns_needed(
    schema: pa.Schema, columns: Sequence[str] | None, flt: pc.Expression | None
) -> Needed:
    """The columns of ``schema`` a scan must make: those DuckDB reads, and those its filter
    names (an aggregate over ``value`` never decodes ``key``). None: every column."""
    if columns is None:
        return None
    needed = set(columns)
    if flt is not None:
        for name in schema.names:
            if name not in needed and _filter_reads(schema, name, flt):
                needed.add(name)
    return frozenset(needed)


def _reads_only_table_id(schema: pa.Schema, flt: pc.Expression) -> bool:
    """Whether ``flt`` names no column but the table number of a shared source."""
    return not any(_filter_reads(schema, n, flt) for n in schema.names if n != TABLE_ID.name)


def _filter_reads(schema: pa.Schema, name: str, flt: pc.Expression) -> bool:
    # Arrow names no expression's fields; binding it to a schema without the column does.
    try:
        schema.remove(schema.get_field_index(name)).empty_table().filter(flt)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return True
    return False


def decoded_ahead(decode: Callable[[T], R], items: Sequence[T], threads: int) -> Iterator[R]:
    """``decode`` of every item, in order, up to ``threads`` of them at once in threads.

    The compiled decoders (an HDFS chain's merge, LZ4, Arrow's kernels) let go of the GIL,
    so partitions decode on several cores while DuckDB consumes the one before; the window
    bounds memory to ``threads`` partitions decoded ahead. A failure is raised where its
    item comes; a consumer that stops early waits for the decodes in flight, none after.
    """
    if threads <= 1 or len(items) <= 1:
        yield from map(decode, items)
        return
    pending: deque[Future[R]] = deque()
    with ThreadPoolExecutor(threads, "stateglass-decode") as pool:
        try:
            for item in items:
                pending.append(pool.submit(decode, item))
                if len(pending) > threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def _with_batch(piece: pa.Table, batch: int) -> pa.Table:
    return piece.append_column(BATCH_ID, constant_column(batch, piece.num_rows, pa.int64()))


def _refuse_unreadable(
    cp: Checkpoint,
    source: StateSource,
    schema: pa.Schema,
    wanted: Sequence[int],
    last: int,
    flt: pc.Expression | None,
) -> None:
    """A query that picks batches none of which can be read says why, as ``state`` does:
    purged by Spark, or not committed. A pick of nothing at all (``batch_id < 0``) is no
    error: it has no rows."""
    if wanted:
        missing = MissingVersion(cp.root, f"the state of batch {wanted[-1]} cannot be rebuilt")
        raise source.explain_missing(wanted[-1] + 1, missing)
    after = first_kept_after(schema, last, flt) if flt is not None else None
    if after is not None:
        raise NotFound(
            cp.path("commits"),
            f"batch {after} is not committed; the last committed batch is {last}",
        )
