"""Paths as Spark's Hadoop file system names them, and which files one chain task needs.

Pure: no Spark, no I/O. The Spark engine hands executors Hadoop-form URLs, so the cluster reads
the checkpoint with its own connectors and credentials. The mapping:

=====================================  ==========================================
StateGlass path                        Hadoop path handed to Spark
=====================================  ==========================================
``/data/cp`` (plain, made absolute)    ``file:///data/cp``
``file:///data/cp``                    unchanged
``s3://b/cp``, ``s3n://b/cp``          ``s3a://b/cp`` (hadoop-aws's connector)
``s3a://``, ``gs://``, ``abfs://``,    unchanged
``abfss://``, ``wasbs://``,
``hdfs://``, ``viewfs://``, ``dbfs:/``
=====================================  ==========================================
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from stateglass.collectors.checkpoints.listing import FULL_KINDS, classify
from stateglass.collectors.fs import FileInfo

# Hadoop reads s3:// and s3n:// only through long-gone connectors; s3a:// is the live one.
SCHEME_MAP = {"s3": "s3a", "s3n": "s3a"}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
# Characters Hadoop's FileInputFormat reads as glob syntax or as a path-list separator.
GLOB_CHARS = frozenset("*?[]{}\\,^")


def hadoop_url(path: str) -> str:
    """The URL Spark's Hadoop file system reads ``path`` by (see the module's table)."""
    match = _SCHEME.match(path)
    # A one-letter "scheme" is a Windows drive (C:\...), not a URL.
    if match is None or len(match.group(1)) == 1:
        return "file://" + os.path.abspath(path)
    scheme = match.group(1).lower()
    return SCHEME_MAP.get(scheme, scheme) + path[len(scheme) :]


def unsafe_chars(url: str) -> str:
    """The characters of ``url`` that Hadoop would read as a glob or a list separator."""
    return "".join(sorted({c for c in url if c in GLOB_CHARS}))


def input_paths(directories: dict[str, list[str]]) -> str:
    """One comma-separated FileInputFormat path list: ``dir/{a,b}`` per directory.

    A brace glob lists each directory once (one LIST request on an object store) instead of
    one status request per file. Callers refuse names with :func:`unsafe_chars` first.
    """
    return ",".join(f"{d}/{{{','.join(sorted(names))}}}" for d, names in directories.items())


@dataclass(frozen=True)
class ChainFiles:
    """The files one chain task reads: its store directory's and its ``SSTs/`` (RocksDB)."""

    store_files: tuple[FileInfo, ...]
    sst_files: tuple[FileInfo, ...] | None = None

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.store_files + (self.sst_files or ()))


def needed_files(
    files: tuple[FileInfo, ...], from_version: int, ssts: tuple[FileInfo, ...] | None = None
) -> ChainFiles:
    """The files a chain needs to count versions ``>= from_version``.

    Rebuilding version ``from_version - 1`` starts at the newest snapshot or zip at or below
    it, so older files are not shipped: an incremental scan reads a few files per chain, not
    the whole history. Names we cannot parse are kept, in case a reader wants them. SSTs are
    shared by many versions and only the zips say which, so every listed SST travels.
    """
    # Format v2 (``N_<uid>.zip``): which file of a version counts depends on commits/, so a
    # newer zip is not proof that an older one is not needed. Ship everything.
    if from_version <= 1 or any("_" in f.name for f in files):
        return ChainFiles(files, ssts)
    parsed = [(f, classify(f.name)) for f in files]
    fulls = [
        kind[0]
        for _, kind in parsed
        if kind and kind[0] is not None and kind[1] in FULL_KINDS and kind[0] < from_version
    ]
    if not fulls:
        return ChainFiles(files, ssts)
    base = max(fulls)
    kept = tuple(f for f, kind in parsed if not kind or kind[0] is None or kind[0] >= base)
    return ChainFiles(kept, ssts)
