"""State at a batch, and the change feed between two batches, exactly as Spark's reader gives them.

Example::

    cp = Checkpoint.open("/data/checkpoints/orders")
    for row in read_state(cp, StateRequest(operator_id=0, store_name="default")):
        print(row.partition_id, row.key, row.value)

State version = batch id + 1 (``StatePartitionReader``: ``getReadStore(batchId + 1)``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from collectors.checkpoint import Checkpoint, StoreInfo
from collectors.errors import CheckpointError, NotFound, UnsupportedCheckpoint
from collectors.stores import StoreContext, StoreReader, open_store
from parsers.errors import ParseError
from parsers.state_rows import RowCodec, codec_for


@dataclass(frozen=True)
class StateRequest:
    """Which state to read. ``batch_id`` None means the last committed batch."""

    operator_id: int = 0
    store_name: str = "default"
    batch_id: int | None = None
    partitions: Sequence[int] | None = None
    state_var: str | None = None


@dataclass(frozen=True, slots=True)
class StateRow:
    partition_id: int
    key: tuple[object, ...]
    value: tuple[object, ...] | None


@dataclass(frozen=True, slots=True)
class ChangeRow:
    batch_id: int
    change_type: str
    partition_id: int
    key: tuple[object, ...]
    value: tuple[object, ...] | None


class StateSource:
    """Opens store readers and row codecs for one (operator, store) of a checkpoint."""

    def __init__(self, cp: Checkpoint, request: StateRequest) -> None:
        self.cp = cp
        self.request = request
        self.store: StoreInfo = cp.store(request.operator_id, request.store_name)
        wanted = request.partitions
        if wanted is not None:
            unknown = sorted(set(wanted) - set(self.store.partitions))
            if unknown:
                raise NotFound(
                    cp.store_dir(request.operator_id, unknown[0], request.store_name),
                    f"no partition {unknown[0]} (partitions: 0..{self.store.num_partitions - 1})",
                )
        self.partitions = sorted(wanted) if wanted is not None else list(self.store.partitions)
        conf = cp.conf
        self.codec_name = conf.codec if conf else "lz4"
        self.row_checksum = conf.row_checksum if conf else False
        merge_v = conf.merge_operator_version if conf else None
        self.merge_delimiter = b"" if merge_v == 2 else b","
        self.encoding_format = conf.encoding_format if conf else "unsaferow"
        self.row_codec: RowCodec = self._row_codec()

    def _row_codec(self) -> RowCodec:
        try:
            return codec_for(
                self.store,
                state_var=self.request.state_var,
                row_checksum=self.row_checksum,
                encoding_format=self.encoding_format,
                merge_delimiter=self.merge_delimiter,
            )
        except ParseError as exc:
            raise UnsupportedCheckpoint(
                self.cp.store_dir(self.store.operator_id, 0, self.store.store_name), exc.why
            ) from exc

    @lru_cache(maxsize=None)  # noqa: B019 - one source per CLI call; the cache dies with it
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
        ctx = StoreContext(
            fs=self.cp.fs,
            store_dir=self.cp.store_dir(self.store.operator_id, partition, self.store.store_name),
            codec=self.codec_name,
            row_checksum=self.row_checksum,
            merge_delimiter=self.merge_delimiter,
            unique_ids=self._unique_ids(partition),
        )
        return open_store(ctx, self.store.provider)

    def decode_error(self, partition: int, exc: ParseError) -> CheckpointError:
        where = self.cp.store_dir(self.store.operator_id, partition, self.store.store_name)
        return UnsupportedCheckpoint(where, exc.why) if "unsupported" in type(exc).__name__.lower() \
            else CheckpointError(where, f"a state row does not decode: {exc.why}")


def _store_index(store: StoreInfo) -> int:
    """Position of a store within a partition's list of unique ids (joins have four)."""
    order = ["left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
             "right-keyWithIndexToValue"]
    return order.index(store.store_name) if store.store_name in order else 0


def read_state(cp: Checkpoint, request: StateRequest) -> Iterator[StateRow]:
    """Every row of the store at ``request.batch_id`` (state version batch id + 1)."""
    source = StateSource(cp, request)
    batch_id = cp.resolve_batch(request.batch_id)
    version = batch_id + 1
    for partition in source.partitions:
        reader = source.reader(partition)
        try:
            for key, value in reader.load(version):
                for k, v in source.row_codec.decode(key, value):
                    yield StateRow(partition, k, v)
        except ParseError as exc:
            raise source.decode_error(partition, exc) from exc


def read_changes(
    cp: Checkpoint, request: StateRequest, from_batch: int, to_batch: int | None = None
) -> Iterator[ChangeRow]:
    """Records written by batches ``from_batch``..``to_batch`` (inclusive), like ``readChangeFeed``."""
    source = StateSource(cp, request)
    last = cp.resolve_batch(to_batch)
    if from_batch > last:
        raise NotFound(cp.path("commits"), f"--from {from_batch} is after --to {last}")
    for partition in source.partitions:
        reader = source.reader(partition)
        for batch in range(from_batch, last + 1):
            try:
                for change_type, key, value in reader.changes(batch + 1):
                    for k, v in source.row_codec.decode_change(change_type, key, value):
                        yield ChangeRow(batch, change_type, partition, k, v)
            except ParseError as exc:
                raise source.decode_error(partition, exc) from exc
