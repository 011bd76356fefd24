"""One module per state store provider; each rebuilds the raw key/value bytes of a version.

The registry maps a provider name to its reader class, which follows
:class:`~stateglass.collectors.stores.base.StoreReader`. The name is the offset log's
``providerClass`` as :attr:`OffsetSeq.provider <stateglass.parsers.logs.OffsetSeq.provider>`
gives it: ``hdfs``, ``rocksdb``, or a custom provider's class name. A new provider is one new
module and one entry here; nothing outside this package asks which reader it holds.

Example::

    reader = open_store(StoreContext(LOCAL, "/cp/state/0/0"), "hdfs")
    for version in reader.versions():
        print(version, len(reader.load_keys(version)))
"""

from __future__ import annotations

from stateglass.collectors.stores.base import StoreContext, StoreReader
from stateglass.collectors.stores.hdfs import HdfsStoreReader
from stateglass.collectors.stores.rocksdb import RocksDBStoreReader

READERS: dict[str, type[StoreReader]] = {
    "hdfs": HdfsStoreReader,
    "rocksdb": RocksDBStoreReader,
}

# File kinds of every provider: one version's changes, and a whole version.
CHANGE_KINDS = frozenset(reader.CHANGE_KIND for reader in READERS.values())
FULL_KINDS = frozenset(reader.FULL_KIND for reader in READERS.values())


def open_store(ctx: StoreContext, provider: str) -> StoreReader:
    """The reader for ``provider`` over the store directory in ``ctx``."""
    return READERS[provider](ctx)


def classify_name(name: str) -> tuple[int, str] | None:
    """``(version, kind)`` of a state file name of any provider; None for other names."""
    for reader in READERS.values():
        found = reader.classify(name)
        if found is not None:
            return found
    return None


def shared_dir(provider: str) -> str | None:
    """The subdirectory whose files ``provider``'s versions share (``SSTs``), or None."""
    return READERS[provider].SHARED_DIR


__all__ = [
    "CHANGE_KINDS",
    "FULL_KINDS",
    "READERS",
    "StoreContext",
    "StoreReader",
    "classify_name",
    "open_store",
    "shared_dir",
]
