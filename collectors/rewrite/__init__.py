"""Writing NEW checkpoints: one writer per state store provider, and their registry.

``stateglass rewrite`` reads a checkpoint and writes another one (never into the one it
reads). A writer follows :class:`~stateglass.collectors.rewrite.base.StoreWriter`; the
registry maps the provider's name, as the readers' registry does (``collectors/stores``), to
its writer. A provider without a writer is refused with one line. docs/rewrite.md.

Example::

    writer = writer_class("hdfs")()
"""

from __future__ import annotations

from stateglass.collectors.errors import RewriteRefused
from stateglass.collectors.rewrite.base import Neutralizer, StoreWriter, WriteTarget, hdfs_rows
from stateglass.collectors.rewrite.hdfs import HdfsStoreWriter
from stateglass.collectors.rewrite.rocksdb import RocksDBStoreWriter
from stateglass.collectors.rewrite.rocksdb_rows import neutral_rows

WRITERS: dict[str, type[StoreWriter]] = {
    "hdfs": HdfsStoreWriter,
    "rocksdb": RocksDBStoreWriter,
}
# How each provider's stored rows become the neutral form a writer takes.
NEUTRALIZERS: dict[str, Neutralizer] = {
    "hdfs": hdfs_rows,
    "rocksdb": neutral_rows,
}


def writer_class(provider: str, where: str = "") -> type[StoreWriter]:
    """The writer registered for ``provider``; an unknown one is a one-line refusal."""
    try:
        return WRITERS[provider]
    except KeyError:
        known = ", ".join(sorted(WRITERS))
        raise RewriteRefused(
            where or provider,
            f"no writer for state store provider {provider} (writers: {known})",
        ) from None


def neutralizer(provider: str, where: str = "") -> Neutralizer:
    """How ``provider``'s stored rows become neutral rows; unknown: a one-line refusal."""
    try:
        return NEUTRALIZERS[provider]
    except KeyError:
        known = ", ".join(sorted(NEUTRALIZERS))
        raise RewriteRefused(
            where or provider,
            f"state of provider {provider} cannot be read as rows to rewrite (readable: {known})",
        ) from None


__all__ = ["NEUTRALIZERS", "WRITERS", "StoreWriter", "WriteTarget", "neutralizer", "writer_class"]
