"""Verify the checksum files beside a scan's new files: a bit flip is a damaged file.

Each file a scan sees for the first time (or changed) is checked against Hadoop's ``.NAME.crc``
sidecar (local and HDFS file systems) and Spark 4.1+'s ``NAME.crc``, whichever exist
(:mod:`stateglass.parsers.checksums`). A mismatch is a ``ChecksumMismatch`` problem row on the
file: the health rules and the restart verdict then treat it as unreadable, as Spark does (its
``ChecksumFileSystem`` and ``ChecksumCheckpointFileManager`` refuse such a file on read). A
file without a checksum file is not judged. Files seen before are not read again: their rows
stay until the file changes. Sidecars are looked for on local file systems (and HDFS mounted
locally) only.

A new RocksDB SST that no matching sidecar covers is checked against its own block checksums
(:func:`stateglass.parsers.sst.verify_sst`), on every file system: object stores keep no
sidecars, so this is the only check of an SST there, and RocksDB refuses a block whose
checksum disagrees when Spark reads it (``docs/formats.md`` §12).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING

from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.limits import active
from stateglass.parsers.checksums import (
    hadoop_sidecar,
    hadoop_size_mismatch,
    spark_checksum_file,
    spark_size_mismatch,
    verify_hadoop,
    verify_spark,
)
from stateglass.parsers.errors import CorruptData, LimitExceeded, ParseError
from stateglass.parsers.sst import verify_sst

if TYPE_CHECKING:
    from stateglass.collectors.fs import FileSystem

KIND = "ChecksumMismatch"
SST_CHECKSUMS = "RocksDB's block checksums: "


def data_block_mismatch(message: str) -> bool:
    """Whether a problem message is an SST's data block disagreeing with its checksum."""
    return message.startswith(f"{SST_CHECKSUMS}data block") and message.endswith("mismatch")


def verify_files(fs: FileSystem, sizes: Mapping[str, int]) -> list[tuple[str, str]]:
    """``(path, why)`` for every file of ``sizes`` (path -> size as listed) whose checksum file
    disagrees with it, or an SST whose own block checksums do. The size is checked first, so a
    file that cannot match is never read (nor one that is not a regular file: a FIFO lists 0
    bytes)."""
    from stateglass.collectors.fs import LOCAL

    out = []
    for path in sorted(sizes):
        # Object stores keep no Hadoop sidecars, and a HEAD request per new file for Spark's
        # would double a remote collect's requests: only SSTs are verified there (below).
        why, covered = _sidecar_mismatch(fs, path, sizes[path]) if fs is LOCAL else (None, False)
        # A sidecar that matched covers every byte of the SST already: its block checksums
        # are re-computed only where none exists (object stores, copies without sidecars),
        # which keeps a local first collect of a big store from reading each SST twice.
        if why is None and not covered and is_sst(path) and sizes[path] > 0:
            why = _sst_mismatch(fs, path)
        if why is not None:
            out.append((path, why))
    return out


def is_sst(path: str) -> bool:
    """A RocksDB table file of a state store (``…/SSTs/NAME.sst``)."""
    return path.endswith(".sst") and posixpath.basename(posixpath.dirname(path)) == "SSTs"


def _sidecar_mismatch(fs: FileSystem, path: str, size: int) -> tuple[str | None, bool]:
    """(why the file disagrees with a checksum file, whether one was checked and matched)."""
    folder, name = posixpath.split(path)
    matched = False
    for sidecar_name, by_size, verify in (
        (hadoop_sidecar(name), hadoop_size_mismatch, verify_hadoop),
        (spark_checksum_file(name), spark_size_mismatch, verify_spark),
    ):
        sidecar = posixpath.join(folder, sidecar_name)
        try:
            # Read without a stat first: a missing checksum file fails the open as cheaply,
            # and one that is there costs one system call less (20,000 new files a commit on
            # a 10,000-partition checkpoint).
            checksum = fs.read(sidecar)
            why = by_size(size, checksum, sidecar)
            if why is None and size > 0:
                why = verify(fs.read(path), checksum, sidecar)
        except (CheckpointError, ParseError):
            # The file or its checksum vanished or cannot be read: the chain readers and
            # the next scan judge the file itself; a bad checksum file judges nothing.
            continue
        if why is not None:
            return f"does not match {sidecar_name}: {why}", False
        matched = True
    return None, matched


def _sst_mismatch(fs: FileSystem, path: str) -> str | None:
    """Why an SST's blocks disagree with their own checksums (RocksDB re-computed), or None.
    An SST is immutable, so this runs once per new file: one read (a GET of its size on an
    object store, kept by the remote cache for later reads of the same file)."""
    try:
        verify_sst(fs.read(path), active())
    except CheckpointError:
        return None  # vanished or unreadable: the chain reader files that problem
    except LimitExceeded:
        return None  # no checksum matter: the store reader refuses it, naming the limit
    except CorruptData as exc:
        return f"{SST_CHECKSUMS}{exc.why}"
    except ParseError:
        return None  # a table layout we do not read (UnsupportedFormat): not judged
    return None
