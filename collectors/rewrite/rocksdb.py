"""The RocksDB provider's writer of a rewrite, as the registry of writers knows it.

It takes one store partition's neutral rows (the HDFS-backed provider's UnsafeRows) and
writes them as a fresh snapshot of the version asked for (:mod:`.rocksdb_writer`), plus
Spark's ``<zip>.crc`` when the destination uses file checksums. A transformWithState store
keeps its state in virtual column families: its rows come as RocksDB stores them, under the
ids of :func:`~.rocksdb_rows.column_family_ids`, which the zip's metadata names. Join state
formats 3 and 4 (column families too) are refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from stateglass.collectors.checkpoints.checkpoint import StoreInfo
from stateglass.collectors.errors import CollectorError
from stateglass.collectors.rewrite.base import WriteTarget
from stateglass.collectors.rewrite.rocksdb_rows import (
    column_family_ids,
    column_family_refusal,
    store_layout,
)
from stateglass.collectors.rewrite.rocksdb_writer import RocksDBTarget, write_partition
from stateglass.parsers.logs import PROVIDERS


class RocksDBStoreWriter:
    """Writes RocksDB store partitions: ``V.zip`` (``V_<uniqueId>.zip``) and its SSTs."""

    PROVIDER: ClassVar[str] = "rocksdb"
    PROVIDER_CLASS: ClassVar[str] = next(c for c, n in PROVIDERS.items() if n == "rocksdb")

    @classmethod
    def refusal(cls, store: StoreInfo) -> str | None:
        if store.uses_column_families:
            return column_family_refusal(store)
        try:
            store_layout(store, f"operator {store.operator_id} store {store.store_name}")
        except CollectorError as exc:
            return exc.why
        return None

    def write_partition(
        self, target: WriteTarget, rows: Iterable[tuple[bytes, bytes]]
    ) -> list[str]:
        store = target.store
        families = column_family_ids(store) if store.uses_column_families else None
        rocksdb_target = RocksDBTarget(
            target.store_dir,
            target.version,
            None if families else store_layout(store, target.store_dir),
            row_checksum=target.row_checksum,
            column_families=families,
            unique_id=target.unique_id,
            file_checksum=target.file_checksum,
            timestamp_ms=target.timestamp_ms,
        )
        return write_partition(rocksdb_target, rows)
