"""The RocksDB provider's writer of a rewrite, as the registry of writers knows it.

It takes one store partition's neutral rows (the HDFS-backed provider's UnsafeRows) and
writes them as a fresh snapshot of the version asked for (:mod:`.rocksdb_writer`), plus
Spark's ``<zip>.crc`` when the destination uses file checksums. A store keeping its state in
virtual column families (transformWithState, join state formats 3 and 4) is refused before
anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from stateglass.collectors.checkpoints.checkpoint import StoreInfo
from stateglass.collectors.errors import CollectorError
from stateglass.collectors.rewrite.base import WriteTarget
from stateglass.collectors.rewrite.rocksdb_rows import store_layout
from stateglass.collectors.rewrite.rocksdb_writer import RocksDBTarget, write_partition
from stateglass.parsers.logs import PROVIDERS


class RocksDBStoreWriter:
    """Writes RocksDB store partitions: ``V.zip`` (``V_<uniqueId>.zip``) and its SSTs."""

    PROVIDER: ClassVar[str] = "rocksdb"
    PROVIDER_CLASS: ClassVar[str] = next(c for c, n in PROVIDERS.items() if n == "rocksdb")

    @classmethod
    def refusal(cls, store: StoreInfo) -> str | None:
        try:
            store_layout(store, f"operator {store.operator_id} store {store.store_name}")
        except CollectorError as exc:
            return exc.why
        return None

    def write_partition(
        self, target: WriteTarget, rows: Iterable[tuple[bytes, bytes]]
    ) -> list[str]:
        layout = store_layout(target.store, target.store_dir)
        rocksdb_target = RocksDBTarget(
            target.store_dir,
            target.version,
            layout,
            row_checksum=target.row_checksum,
            unique_id=target.unique_id,
            file_checksum=target.file_checksum,
            timestamp_ms=target.timestamp_ms,
        )
        return write_partition(rocksdb_target, rows)
