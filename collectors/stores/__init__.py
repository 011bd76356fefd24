"""One module per state store provider; each rebuilds the raw key/value bytes of a version.

The registry maps a provider name (``hdfs``, ``rocksdb``) to its reader class.
"""

from __future__ import annotations

from stateglass.collectors.stores.base import StoreContext, StoreReader
from stateglass.collectors.stores.hdfs import HdfsStoreReader
from stateglass.collectors.stores.rocksdb import RocksDBStoreReader

READERS: dict[str, type[StoreReader]] = {
    "hdfs": HdfsStoreReader,
    "rocksdb": RocksDBStoreReader,
}


def open_store(ctx: StoreContext, provider: str) -> StoreReader:
    """The reader for ``provider`` over the store directory in ``ctx``."""
    return READERS[provider](ctx)


__all__ = ["READERS", "StoreContext", "StoreReader", "open_store"]
