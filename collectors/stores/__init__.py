"""One module per state store provider; each rebuilds the raw key/value bytes of a version.

The registry maps a provider name to its reader class, which follows
:class:`~stateglass.collectors.stores.base.StoreReader`. The name is the offset log's
``providerClass`` as :attr:`OffsetSeq.provider <stateglass.parsers.logs.OffsetSeq.provider>`
gives it: ``hdfs``, ``rocksdb``, or a custom provider's class name. Readers register as entry
points of the group ``stateglass.providers`` (the built-in ones too, in pyproject.toml), so a
provider is one module and one entry point, in this package or in any installed distribution;
nothing outside this package asks which reader it holds (docs/providers.md).

Example::

    reader = open_store(StoreContext(LOCAL, "/cp/state/0/0"), "hdfs")
    for version in reader.versions():
        print(version, len(reader.load_keys(version)))
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

from stateglass.collectors.errors import UnsupportedCheckpoint
from stateglass.collectors.stores.base import StoreContext, StoreReader
from stateglass.collectors.stores.hdfs import HdfsStoreReader
from stateglass.collectors.stores.rocksdb import RocksDBStoreReader

ENTRY_POINT_GROUP = "stateglass.providers"
# What a source tree without installed metadata still reads.
BUILT_IN: dict[str, type[StoreReader]] = {
    "hdfs": HdfsStoreReader,
    "rocksdb": RocksDBStoreReader,
}


def load_readers() -> dict[str, type[StoreReader]]:
    """Every reader registered in :data:`ENTRY_POINT_GROUP`, by provider name.

    A plugin that fails to import is left out with one line on stderr: a broken third-party
    provider must not stop StateGlass from reading the checkpoints it can.
    """
    found: dict[str, type[StoreReader]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            found[ep.name] = ep.load()
        except Exception as exc:  # any import error of a foreign plugin
            print(
                f"stateglass: provider plugin {ep.name!r} ({ep.value}) failed to load: {exc}",
                file=sys.stderr,
            )
    return found or dict(BUILT_IN)


READERS: dict[str, type[StoreReader]] = load_readers()

# File kinds of every provider: one version's changes, and a whole version.
CHANGE_KINDS = frozenset(reader.CHANGE_KIND for reader in READERS.values())
FULL_KINDS = frozenset(reader.FULL_KIND for reader in READERS.values())


def reader_class(provider: str, where: str = "") -> type[StoreReader]:
    """The reader registered for ``provider``; an unknown one is a one-line error."""
    try:
        return READERS[provider]
    except KeyError:
        raise UnsupportedCheckpoint(
            where or provider,
            f"state store provider {provider} has no reader: install a plugin that registers it "
            f"in the entry-point group {ENTRY_POINT_GROUP!r} (docs/providers.md)",
        ) from None


def open_store(ctx: StoreContext, provider: str) -> StoreReader:
    """The reader for ``provider`` over the store directory in ``ctx``."""
    return reader_class(provider, ctx.store_dir)(ctx)


def classify_name(name: str) -> tuple[int, str] | None:
    """``(version, kind)`` of a state file name of any provider; None for other names."""
    for reader in READERS.values():
        found = reader.classify(name)
        if found is not None:
            return found
    return None


def shared_dir(provider: str) -> str | None:
    """The subdirectory whose files ``provider``'s versions share (``SSTs``), or None."""
    return reader_class(provider).SHARED_DIR


def row_layout(provider: str) -> str:
    """How ``provider`` lays out a row's bytes: ``hdfs`` (plain UnsafeRows, as the HDFS
    provider and providers that keep its records) or ``rocksdb`` (RocksDB's encoders)."""
    return reader_class(provider).ROW_LAYOUT


__all__ = [
    "CHANGE_KINDS",
    "ENTRY_POINT_GROUP",
    "FULL_KINDS",
    "READERS",
    "StoreContext",
    "StoreReader",
    "classify_name",
    "open_store",
    "reader_class",
    "row_layout",
    "shared_dir",
]
