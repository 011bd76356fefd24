"""The HDFS-backed provider's writer: one ``V.snapshot`` per store partition.

Spark's ``HDFSBackedStateStoreProvider`` loads version ``V`` from ``V.snapshot`` alone when it
exists, so a rewrite writes exactly that file (the record stream of ``parsers/hdfs_files.py``,
compressed with the store's codec) and no delta: nothing is replayed after a restart.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import ClassVar

from stateglass.collectors.checkpoints.checkpoint import StoreInfo
from stateglass.collectors.rewrite.base import WriteTarget
from stateglass.collectors.rewrite.files import write_state_file
from stateglass.parsers.hdfs_files import encode_records
from stateglass.parsers.logs import PROVIDERS


class HdfsStoreWriter:
    """Writes ``<version>.snapshot`` (and Spark's ``.crc`` when asked) for a store partition."""

    PROVIDER: ClassVar[str] = "hdfs"
    PROVIDER_CLASS: ClassVar[str] = next(c for c, n in PROVIDERS.items() if n == "hdfs")

    @classmethod
    def refusal(cls, store: StoreInfo) -> str | None:
        if store.is_transform_with_state or store.uses_column_families:
            return (
                "[STORE_BACKEND_NOT_SUPPORTED_FOR_TWS] Spark refuses transformWithState (and any "
                "store with column families) on the HDFS-backed provider: use --provider rocksdb"
            )
        return None

    def write_partition(
        self, target: WriteTarget, rows: Iterable[tuple[bytes, bytes]]
    ) -> list[str]:
        stream = encode_records(rows, row_checksum=target.row_checksum)
        path = os.path.join(target.store_dir, f"{target.version}.snapshot")
        return write_state_file(path, stream, target)
