"""State at a batch, and the change feed between two batches, exactly as Spark's reader gives them.

Example::

    cp = Checkpoint.open("/data/checkpoints/orders")
    source = StateSource(cp, StateRequest(operator_id=0, store_name="default"))
    codec = source.row_codec
    for partition, key, value in iter_raw_state(source, batch_id=None):
        with source.decoding(partition):
            for row in codec.rows(key, value):
                print(partition, row)

State version = batch id + 1 (``StatePartitionReader``: ``getReadStore(batchId + 1)``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache, cached_property
from typing import TYPE_CHECKING

from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.errors import (
    CheckpointError,
    CorruptFile,
    MissingVersion,
    NotFound,
    UnsupportedCheckpoint,
)
from stateglass.collectors.fs import FileInfo
from stateglass.collectors.stores import StoreContext, StoreReader, open_store, row_layout
from stateglass.collectors.stores.base import Change
from stateglass.collectors.stores.rocksdb import names_unique_id
from stateglass.parsers.errors import ParseError, UnsupportedFormat
from stateglass.parsers.state_arrow import (
    TextForm,
    chain_tables,
    partition_tables,
    plain_text,
    run_tables,
    runs_mergeable,
)
from stateglass.parsers.state_rows import (
    LIST_STATE,
    STATE_VARIABLE_TYPES,
    TIMER_STATE,
    RowCodec,
    StoreSpec,
)

if TYPE_CHECKING:
    import pyarrow as pa

# Join state format 4 keeps lists of values (rows; counts) in these column families.
JOIN_MULTI_VALUED = ("-keyWithTsToValues", "-tsWithKey")
# readRegisteredTimers reads ``TimerStateUtils.getTimerStateVarNames(timeMode)._1``.
TIMER_VARIABLES = {
    "EventTime": "$eventTimers_keyToTimestamp",
    "ProcessingTime": "$procTimers_keyToTimestamp",
}


@dataclass(frozen=True)
class StateRequest:
    """Which state to read. ``batch_id`` None means the last committed batch."""

    operator_id: int = 0
    store_name: str = "default"
    batch_id: int | None = None
    partitions: Sequence[int] | None = None
    state_var: str | None = None
    # transformWithState, as Spark's readRegisteredTimers and flattenCollectionTypes options.
    read_timers: bool = False
    flatten: bool = True


class StateSource:
    """Opens store readers and row codecs for one (operator, store) of a checkpoint."""

    def __init__(self, cp: Checkpoint, request: StateRequest) -> None:
        self.cp = cp
        self.request = request
        self.store: StoreInfo = _store(cp, request)
        if self.store.store_name != request.store_name:
            # Join state format 3 keeps its four stores as column families of "default";
            # Spark's reader takes their names as storeName.
            self.request = request = replace(
                request, store_name=self.store.store_name, state_var=request.store_name
            )
        wanted = request.partitions
        if wanted is not None:
            unknown = sorted(set(wanted) - set(self.store.partitions))
            if unknown:
                raise NotFound(
                    cp.store_dir(request.operator_id, unknown[0], request.store_name),
                    f"no partition {unknown[0]} (partitions: 0..{self.store.num_partitions - 1})",
                )
        # A repartition (Spark 4.2+) changes the partition count from one batch to the next:
        # the partitions of the batch asked for, not every directory there is.
        self.partitions = (
            sorted(wanted) if wanted is not None else self.partitions_for(request.batch_id)
        )
        conf = cp.conf
        self.codec_name = conf.codec if conf else "lz4"
        self.row_checksum = conf.row_checksum if conf else False
        merge_v = conf.merge_operator_version if conf else None
        self.merge_delimiter = b"" if merge_v == 2 else b","
        self.encoding_format = conf.encoding_format if conf else "unsaferow"
        self._listings: dict[int, tuple[FileInfo, ...]] = {}

    def partitions_for(self, batch_id: int | None) -> list[int]:
        """The store's partitions at ``batch_id`` (None: the last committed batch), or the
        partitions asked for; every partition on disk when no batch is committed."""
        if self.request.partitions is not None:
            return sorted(self.request.partitions)
        if batch_id is None:
            batch_id = self.cp.last_committed_batch
            if batch_id is None:
                return list(self.store.partitions)
        return self.cp.partitions_at(self.store.operator_id, batch_id)

    def all_partitions(self) -> list[int]:
        """Every partition directory of the store, or the partitions asked for."""
        if self.request.partitions is not None:
            return sorted(self.request.partitions)
        return list(self.store.partitions)

    def readable_versions(self) -> list[int]:
        """State versions whose every partition (at that version's count) can be rebuilt."""
        per_partition = {p: set(self.reader(p).versions()) for p in self.all_partitions()}
        candidates = sorted(set().union(*per_partition.values())) if per_partition else []
        return [
            v
            for v in candidates
            if all(v in per_partition.get(p, ()) for p in self.partitions_for(v - 1))
        ]

    @cached_property
    def row_codec(self) -> RowCodec:
        """Built on first use: listing versions needs no schema."""
        spec, family = self._spec
        if family is None:
            return RowCodec(spec)
        return RowCodec(replace(spec, cf_id=self._cf_id(family)))

    @cached_property
    def output_codec(self) -> RowCodec:
        """A codec whose ``columns`` are :attr:`row_codec`'s, built from the schema files
        alone: it opens no partition file (a column family's id is not looked up), so it
        names the output columns but must not decode."""
        return RowCodec(self._spec[0])

    @cached_property
    def _spec(self) -> tuple[StoreSpec, str | None]:
        """The store's row spec without its column family id, and the column family whose
        id the rows need (None: the store has no column families)."""
        store = self.store
        where = self.cp.store_dir(store.operator_id, 0, store.store_name)
        family: str | None = None
        kind: str | None = None
        multi_value = False
        if store.is_transform_with_state and store.state_variables:
            family, kind = self._tws_variable(where)
            schema = store.column_family(family)
            if schema is None:
                raise UnsupportedCheckpoint(where, f"state variable {family!r} has no schema entry")
            multi_value = kind == LIST_STATE
        elif store.uses_column_families:
            names = [cf.name for cf in store.column_families]
            family = self.request.state_var or ""
            if self.request.read_timers:
                raise NotFound(where, "--read-timers is only for transformWithState operators")
            if not family:
                raise NotFound(
                    where,
                    "this store keeps several state variables; pick one with --state-var "
                    f"({', '.join(names)})",
                )
            schema = store.column_family(family)
            if schema is None:
                raise NotFound(where, f"no state variable {family!r} (known: {', '.join(names)})")
            multi_value = family.endswith(JOIN_MULTI_VALUED)
        else:
            if self.request.state_var or self.request.read_timers:
                option = "--state-var" if self.request.state_var else "--read-timers"
                raise NotFound(
                    where,
                    f"{option} is only for transformWithState operators "
                    f"(operator {store.operator_id} is {store.operator_name})",
                )
            schema = store.column_family(None)
        if schema is None:
            raise UnsupportedCheckpoint(where, "no state schema file found for this store")
        spec = StoreSpec(
            provider=row_layout(store.provider),
            key_schema=schema.key_schema,
            value_schema=schema.value_schema,
            key_encoder_spec=schema.key_state_encoder_spec if store.uses_column_families else None,
            num_cols_prefix_key=store.num_cols_prefix_key,
            multi_value=multi_value,
            row_checksum=self.row_checksum,
            encoding_format=self.encoding_format,
            state_kind=kind,
            flatten=self.request.flatten,
        )
        try:
            RowCodec(spec)
        except ParseError as exc:
            raise UnsupportedCheckpoint(where, exc.why) from exc
        return spec, family

    def _tws_variable(self, where: str) -> tuple[str, str]:
        """The (column family, kind) a transformWithState read asks for, checked as Spark does.

        ``--state-var`` names a ValueState, ListState or MapState; ``--read-timers`` reads
        the operator's TimerState (``$eventTimers_keyToTimestamp`` or
        ``$procTimers_keyToTimestamp`` by time mode). One of them is required.
        """
        store, request = self.store, self.request
        user_vars = [v.name for v in store.state_variables if v.kind != TIMER_STATE]
        known = ", ".join(user_vars) or "none"
        if request.read_timers:
            if request.state_var:
                raise NotFound(where, "--state-var and --read-timers cannot be used together")
            name = TIMER_VARIABLES.get(store.time_mode or "")
            if name is None:
                raise NotFound(
                    where, f"no registered timers in time mode {store.time_mode or 'None'}"
                )
        else:
            if not request.state_var:
                timers = " or --read-timers" if store.time_mode in TIMER_VARIABLES else ""
                raise NotFound(
                    where,
                    "a transformWithState operator is read one state variable at a time: "
                    f"pick one with --state-var{timers} (state variables: {known})",
                )
            name = request.state_var
        var = store.state_variable(name)
        if var is None:
            raise NotFound(
                where,
                f"state variable {name!r} is not defined for the transformWithState operator "
                f"(state variables: {known})",
            )
        if var.kind == TIMER_STATE and not request.read_timers:
            raise NotFound(
                where, f"{name!r} holds the registered timers: read it with --read-timers"
            )
        if var.kind not in STATE_VARIABLE_TYPES:
            raise UnsupportedCheckpoint(where, f"state variable type {var.kind!r} of {name!r}")
        return var.name, var.kind

    def _cf_id(self, name: str) -> int:
        """The id of column family ``name``, from the first partition whose files record it."""
        for partition in self.partitions:
            found = self.reader(partition).column_family_id(name)
            if found is not None:
                return found
        raise NotFound(
            self.cp.store_dir(self.store.operator_id, 0, self.store.store_name),
            f"state variable {name!r} has no column family in any retained zip",
        )

    @cache  # noqa: B019 - one source per CLI call; the cache dies with it
    def _unique_ids(self, partition: int) -> dict[int, str]:
        """Checkpoint format v2: committed unique id per state version, from commits/."""
        out: dict[int, str] = {}
        op = self.store.operator_id
        index = _store_index(self.store)
        for b in self.cp.commit_batch_ids:
            commit = self.cp.commit(b)
            ids = (commit.state_unique_ids or {}).get(op)
            if ids is None or partition >= len(ids) or index >= len(ids[partition]):
                continue
            out[b + 1] = ids[partition][index]
        return out

    def reader(self, partition: int) -> StoreReader:
        """A reader of ``partition``, on the source's listing of its directory: a page lists
        the versions, then reads one or two of them, for each of 200 partitions, and one
        listing of a partition's hundreds of files costs about what reading a version does.
        The listing is the source's view of the directory, as the batch ids are the
        checkpoint's (a dashboard opens a new source when a batch commits)."""
        return open_store(self.context(partition), self.store.provider)

    def context(self, partition: int) -> StoreContext:
        """What a reader of ``partition`` is opened on, with the source's listing of it."""
        ctx = StoreContext(
            fs=self.cp.fs,
            store_dir=self.cp.store_dir(self.store.operator_id, partition, self.store.store_name),
            codec=self.codec_name,
            row_checksum=self.row_checksum,
            merge_delimiter=self.merge_delimiter,
        )
        files = self._listings.get(partition)
        if files is None:
            files = self._listings[partition] = tuple(ctx.listing())
        # Only format v2's files name a unique id. Spark keeps a hundred commits by default,
        # and on an object store each is a request: a v1 store reads none of them.
        v2 = any(names_unique_id(f.name) for f in files)
        return replace(ctx, files=files, unique_ids=self._unique_ids(partition) if v2 else {})

    def load(self, partition: int, version: int) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of ``partition`` at ``version``; a purged version says so."""
        try:
            yield from self.reader(partition).load(version)
        except MissingVersion as exc:
            raise self.explain_missing(version, exc) from exc

    def chain_data(self, partition: int, version: int) -> tuple[bytes | None, list[bytes]] | None:
        """The decompressed files that make ``version`` of ``partition``, for a compiled merge
        (see :meth:`StoreReader.chain_data`); None where the provider's files are not that."""
        try:
            return self.reader(partition).chain_data(version)
        except MissingVersion as exc:
            raise self.explain_missing(version, exc) from exc

    @contextmanager
    def explaining(self, version: int) -> Iterator[None]:
        """A purged ``version`` said in batches (see :meth:`explain_missing`)."""
        try:
            yield
        except MissingVersion as exc:
            raise self.explain_missing(version, exc) from exc

    def tables(
        self,
        partition: int,
        version: int,
        text_form: TextForm = plain_text,
        chunk_rows: int = 65_536,
        columns: Collection[str] | None = None,
    ) -> Iterator[pa.Table]:
        """Every row of ``partition`` at ``version`` as Arrow tables of Spark's reader's
        columns (``columns``: those read, see :func:`partition_tables`), ``chunk_rows`` a
        table. An HDFS chain or RocksDB's tables are merged and cut into columns in C
        (:meth:`merged_tables`); what that refuses is loaded item by item, which names a
        damaged file or row."""
        with self.decoding(partition):
            merged = self.merged_tables(partition, version, chunk_rows, columns)
            if merged is not None:
                yield from merged
                return
            items = self.load_items(partition, version)
            yield from partition_tables(
                self.row_codec, partition, items, text_form, chunk_rows, columns
            )

    def merged_tables(
        self,
        partition: int,
        version: int,
        chunk_rows: int = 65_536,
        columns: Collection[str] | None = None,
    ) -> list[pa.Table] | None:
        """:meth:`tables` from an HDFS chain (:func:`chain_tables`) or RocksDB's tables
        (:func:`run_tables`) merged in C; None where that does not apply, or refuses what
        the item path must judge."""
        chain = self.chain_data(partition, version)
        if chain is not None:
            return chain_tables(self.row_codec, partition, *chain, chunk_rows, columns)
        if not runs_mergeable(self.row_codec):
            return None  # the tables would be read for nothing
        runs = self.sorted_runs(partition, version)
        if runs is not None:
            return run_tables(self.row_codec, partition, runs, chunk_rows, columns)
        return None

    def sorted_runs(self, partition: int, version: int) -> list[list[bytes]] | None:
        """The decoded tables that make ``version`` of ``partition``, for a compiled merge
        (see :meth:`StoreReader.sorted_runs`); None where the provider's files are not that."""
        try:
            return self.reader(partition).sorted_runs(version)
        except MissingVersion as exc:
            raise self.explain_missing(version, exc) from exc

    def load_items(self, partition: int, version: int) -> list[tuple[bytes, bytes]]:
        """:meth:`load` as a list, without a generator step per item (a whole partition)."""
        try:
            return list(self.reader(partition).load(version))
        except MissingVersion as exc:
            raise self.explain_missing(version, exc) from exc

    def load_keys(self, partition: int, version: int) -> set[bytes]:
        """The stored keys of ``partition`` at ``version``, values never read."""
        try:
            return self.reader(partition).load_keys(version)
        except MissingVersion as exc:
            raise self.explain_missing(version, exc) from exc

    def lookup(
        self, partition: int, keys: Collection[bytes], versions: Sequence[int]
    ) -> Iterator[tuple[int, dict[bytes, bytes]]]:
        """``(version, {key: value})`` of the stored ``keys`` of ``partition`` present at each
        of ``versions``, ascending: one replay of the partition's chain, the store never
        rebuilt whole (what one key's history, or a diff's changed keys, need)."""
        try:
            yield from self.reader(partition).lookup(keys, versions)
        except MissingVersion as exc:
            raise self.explain_missing(min(versions), exc) from exc

    def differing_keys(self, partition: int, before: int, after: int) -> list[bytes] | None:
        """The stored keys of ``partition`` that may differ between ``before`` and ``after``,
        from the files the two versions do not share (see
        :meth:`StoreReader.differing_keys`); None when the files cannot say."""
        with self.explaining(before):
            return self.reader(partition).differing_keys(before, after)

    def flushed_changes(
        self, partition: int, before: int, after: int
    ) -> dict[bytes, bytes | None] | None:
        """What ``after`` changed from ``before`` when it only added flushed files (see
        :meth:`StoreReader.flushed_changes`); None when the files cannot say."""
        with self.explaining(before):
            return self.reader(partition).flushed_changes(before, after)

    def changes(self, partition: int, version: int) -> Iterator[Change]:
        """The records ``version`` wrote in ``partition``; a purged version says so."""
        try:
            yield from self.reader(partition).changes(version)
        except MissingVersion as exc:
            raise self.explain_missing(version, exc) from exc

    def oldest_readable_batch(self) -> int | None:
        """The oldest batch whose state every partition can still rebuild (None: none can)."""
        firsts: dict[int, int] = {}
        for partition in self.all_partitions():
            versions = self.reader(partition).versions()
            if versions:
                firsts[partition] = versions[0]
        # Partitions a repartition added start at it, and those it dropped end there: a
        # batch counts only the partitions of its own time.
        for version in sorted(set(firsts.values())):
            wanted = self.partitions_for(version - 1)
            if wanted and all(p in firsts and firsts[p] <= version for p in wanted):
                return version - 1
        return None

    def explain_missing(self, version: int, exc: MissingVersion) -> MissingVersion:
        """Say in batches, not files, why ``version`` cannot be read, when Spark purged it."""
        oldest = self.oldest_readable_batch()
        if oldest is None or version - 1 >= oldest:
            return exc  # a hole inside the retained history: the file-level message is the news
        return MissingVersion(
            self.cp.root,
            f"the state of batch {version - 1} was purged by Spark; "
            f"the oldest readable batch is {oldest}",
        )

    @contextmanager
    def decoding(self, partition: int) -> Iterator[None]:
        """Turn a row that does not decode into an error naming this store's directory."""
        try:
            yield
        except ParseError as exc:
            raise self.decode_error(partition, exc) from exc

    def decode_error(self, partition: int, exc: ParseError) -> CheckpointError:
        """A row that does not decode: name the store directory (rows have no file of their own)."""
        where = self.cp.store_dir(self.store.operator_id, partition, self.store.store_name)
        return decode_error(where, exc)


def decode_error(store_dir: str, exc: ParseError) -> CheckpointError:
    """A row of the store in ``store_dir`` that does not decode, as the user reads it."""
    if isinstance(exc, UnsupportedFormat):
        return UnsupportedCheckpoint(store_dir, exc.why)
    return CorruptFile(store_dir, f"a state row does not decode: {exc}")


def _store(cp: Checkpoint, request: StateRequest) -> StoreInfo:
    """The store a request names, or the one keeping it as a column family (join format 3)."""
    try:
        return cp.store(request.operator_id, request.store_name)
    except NotFound:
        for store in cp.stores():
            if (
                store.operator_id == request.operator_id
                and store.uses_column_families
                and not store.is_transform_with_state
                and not request.state_var
                and store.column_family(request.store_name) is not None
            ):
                return store
        raise


def _store_index(store: StoreInfo) -> int:
    """Position of a store within a partition's list of unique ids (joins have four)."""
    order = [
        "left-keyToNumValues",
        "left-keyWithIndexToValue",
        "right-keyToNumValues",
        "right-keyWithIndexToValue",
    ]
    return order.index(store.store_name) if store.store_name in order else 0


RawItem = tuple[int, bytes, "bytes | None"]
RawChange = tuple[int, str, int, bytes, "bytes | None"]


def iter_raw_state(source: StateSource, batch_id: int | None) -> Iterator[RawItem]:
    """``(partition, key bytes, value bytes)`` as stored, at state version batch id + 1."""
    batch = source.cp.resolve_batch(batch_id)
    for partition in source.partitions_for(batch):
        for key, value in source.load(partition, batch + 1):
            yield partition, key, value


def iter_raw_changes(
    source: StateSource, from_batch: int, to_batch: int | None
) -> Iterator[RawChange]:
    """``(batch, change type, partition, key, value)`` as stored, per partition then batch."""
    cp = source.cp
    last = cp.resolve_batch(to_batch)
    if from_batch < 0:
        raise NotFound(cp.path("commits"), f"--from must be >= 0, got {from_batch}")
    if from_batch > last:
        raise NotFound(cp.path("commits"), f"--from {from_batch} is after --to {last}: swap them")
    refuse_repartitions(cp, from_batch, last)
    held = {batch: set(source.partitions_for(batch)) for batch in range(from_batch, last + 1)}
    for partition in sorted(set().union(*held.values())):
        for batch in range(from_batch, last + 1):
            if partition not in held[batch]:
                continue  # before or after a repartition, the partition held no state
            for change_type, key, value in source.changes(partition, batch + 1):
                yield batch, change_type, partition, key, value


def refuse_repartitions(cp: Checkpoint, from_batch: int, to_batch: int) -> None:
    """A change feed across a repartition cannot be read: say which batch and what to read."""
    for move in cp.repartitions:
        if from_batch <= move.batch_id <= to_batch:
            # Spark's change feed fails there too (no changelog is written for that version).
            raise MissingVersion(
                cp.path("offsets", str(move.batch_id)),
                f"batch {move.batch_id} is a repartition ({move.partitions_before} → "
                f"{move.partitions_after} partitions): Spark wrote the state anew, with no "
                f"change records; read changes up to {move.batch_id - 1} or from "
                f"{move.batch_id + 1}, or the state at batch {move.batch_id}",
            )
