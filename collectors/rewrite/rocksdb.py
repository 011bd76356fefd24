"""The RocksDB provider's writer of a rewrite, as the registry of writers knows it.

It takes one store partition's neutral rows (the HDFS-backed provider's UnsafeRows) and
writes them as a fresh snapshot of the version asked for (:mod:`.rocksdb_writer`). A store
keeping its state in virtual column families (transformWithState, join state formats 3 and
4) is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Protocol

from stateglass.collectors.checkpoints.checkpoint import StoreInfo
from stateglass.collectors.errors import CollectorError
from stateglass.collectors.rewrite.rocksdb_rows import store_layout
from stateglass.collectors.rewrite.rocksdb_writer import RocksDBTarget, write_partition

PROVIDER_CLASS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


class RocksDBWriteTarget(Protocol):
    """What the RocksDB writer reads of a rewrite's target partition."""

    @property
    def store_dir(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def store(self) -> StoreInfo: ...
    @property
    def row_checksum(self) -> bool: ...
    @property
    def unique_id(self) -> str | None: ...


class RocksDBStoreWriter:
    """Writes RocksDB store partitions: ``V.zip`` (``V_<uniqueId>.zip``) and its SSTs."""

    PROVIDER: ClassVar[str] = "rocksdb"
    PROVIDER_CLASS: ClassVar[str] = PROVIDER_CLASS

    @classmethod
    def refusal(cls, store: StoreInfo) -> str | None:
        """Why ``store`` cannot be written as RocksDB state, or None."""
        try:
            store_layout(store, f"operator {store.operator_id} store {store.store_name}")
        except CollectorError as exc:
            return exc.why
        return None

    def write_partition(
        self, target: RocksDBWriteTarget, rows: Iterable[tuple[bytes, bytes]]
    ) -> list[str]:
        """Write ``rows`` as version ``target.version``; return the paths written."""
        layout = store_layout(target.store, target.store_dir)
        return write_partition(
            RocksDBTarget(
                target.store_dir,
                target.version,
                layout,
                row_checksum=target.row_checksum,
                unique_id=target.unique_id,
            ),
            rows,
        )
