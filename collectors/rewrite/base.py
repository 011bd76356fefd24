"""What a writer of one provider's state files gets, and the protocol it follows.

A writer writes the state of ONE store partition at one version, as full files of its
provider, from rows in the neutral form: ``(key, value)`` UnsafeRow bytes as the HDFS-backed
provider stores them with row checksums off. It never hashes keys (the caller gives it each
partition's rows) and never touches anything outside ``target.store_dir``.

Example::

    writer = writer_class("hdfs")()
    written = writer.write_partition(target, [(key_bytes, value_bytes)])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar, Protocol

from stateglass.collectors.checkpoints.checkpoint import StoreInfo


@dataclass(frozen=True)
class WriteTarget:
    """Everything a writer needs for one store partition of the destination."""

    store_dir: str  # a local directory: state/<op>/<partition>[/<store name>] of the destination
    version: int  # the state version to write: the batch the rewrite ends at, plus one
    partition: int
    store: StoreInfo  # the source store: names, schemas, column families, TWS variables
    codec: str = "lz4"  # spark.sql.streaming.stateStore.compression.codec of the destination
    row_checksum: bool = False  # spark.sql.streaming.stateStore.rowChecksum.enabled
    file_checksum: bool = False  # Spark 4.1+'s <file>.crc beside each state file
    changelog: bool = False  # RocksDB: changelog checkpointing on in the destination
    timestamp_ms: int = 0  # the time written into checksum files and metadata
    unique_id: str | None = None  # checkpoint format v2: the version's unique id


class StoreWriter(Protocol):
    """Writes one provider's full state files for a store partition."""

    PROVIDER: ClassVar[str]  # the registry's name ("hdfs", "rocksdb")
    PROVIDER_CLASS: ClassVar[str]  # Spark's providerClass, pinned in offsets/

    @classmethod
    def refusal(cls, store: StoreInfo) -> str | None:
        """Why this provider cannot hold ``store`` (Spark's reason), or None."""
        ...

    def write_partition(
        self, target: WriteTarget, rows: Iterable[tuple[bytes, bytes]]
    ) -> list[str]:
        """Write ``rows`` as the whole state of ``target``; the paths written."""
        ...


# A provider's stored rows (as its reader's ``load`` gives them) in the neutral form:
# ``(store, rows, row_checksum=, where=)``. The rewrite reads sources through it and the
# self-check reads the destination back through it.
Neutralizer = Callable[..., Iterator[tuple[bytes, bytes]]]


def hdfs_rows(
    store: StoreInfo, rows: Iterable[tuple[bytes, bytes]], *, row_checksum: bool, where: str
) -> Iterator[tuple[bytes, bytes]]:
    """The HDFS provider's rows are the neutral form (its reader strips row checksums)."""
    return iter(rows)
