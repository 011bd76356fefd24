"""Writing NEW checkpoints: one writer per state store provider, and their registry.

``stateglass rewrite`` reads a checkpoint and writes another one (never into the one it
reads). A writer follows :class:`~stateglass.collectors.rewrite.base.StoreWriter`; the
registry maps the provider's name, as the readers' registry does (``collectors/stores``), to
its writer. A provider without a writer is refused with one line. docs/rewrite.md.

Example::

    writer = writer_class("hdfs")()
"""

from __future__ import annotations

from typing import TypeVar

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


T = TypeVar("T")


def _registered(table: dict[str, T], provider: str, where: str, why: str) -> T:
    """``table[provider]``, or a one-line refusal saying ``why`` and what is registered."""
    try:
        return table[provider]
    except KeyError:
        known = ", ".join(sorted(table))
        raise RewriteRefused(where or provider, f"{why} (registered: {known})") from None


def writer_class(provider: str, where: str = "") -> type[StoreWriter]:
    """The writer registered for ``provider``; an unknown one is a one-line refusal."""
    return _registered(WRITERS, provider, where, f"no writer for state store provider {provider}")


def neutralizer(provider: str, where: str = "") -> Neutralizer:
    """How ``provider``'s stored rows become neutral rows; unknown: a one-line refusal."""
    why = f"state of provider {provider} cannot be read as rows to rewrite"
    return _registered(NEUTRALIZERS, provider, where, why)


__all__ = ["NEUTRALIZERS", "WRITERS", "StoreWriter", "WriteTarget", "neutralizer", "writer_class"]
