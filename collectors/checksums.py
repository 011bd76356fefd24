"""Verify the checksum files beside a scan's new files: a bit flip is a damaged file.

Each file a scan sees for the first time (or changed) is checked against Hadoop's ``.NAME.crc``
sidecar (local and HDFS file systems) and Spark 4.1+'s ``NAME.crc``, whichever exist
(:mod:`stateglass.parsers.checksums`). A mismatch is a ``ChecksumMismatch`` problem row on the
file: the health rules and the restart verdict then treat it as unreadable, as Spark does (its
``ChecksumFileSystem`` and ``ChecksumCheckpointFileManager`` refuse such a file on read). A
file without a checksum file is not judged. Files seen before are not read again: their rows
stay until the file changes. Only local file systems (and HDFS mounted locally) are verified.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING

from stateglass.collectors.errors import CheckpointError
from stateglass.parsers.checksums import (
    hadoop_sidecar,
    hadoop_size_mismatch,
    spark_checksum_file,
    spark_size_mismatch,
    verify_hadoop,
    verify_spark,
)
from stateglass.parsers.errors import ParseError

if TYPE_CHECKING:
    from stateglass.collectors.fs import FileSystem

KIND = "ChecksumMismatch"


def verify_files(fs: FileSystem, sizes: Mapping[str, int]) -> list[tuple[str, str]]:
    """``(path, why)`` for every file of ``sizes`` (path -> size as listed) whose checksum file
    disagrees with it. The size is checked first, so a file that cannot match is never read
    (nor one that is not a regular file: a FIFO lists 0 bytes)."""
    from stateglass.collectors.fs import LOCAL

    if fs is not LOCAL:
        # Object stores keep no Hadoop sidecars, and a HEAD request per new file for Spark's
        # would double a remote collect's requests: remote files are not verified (yet).
        return []
    out = []
    for path in sorted(sizes):
        folder, name = posixpath.split(path)
        for sidecar_name, by_size, verify in (
            (hadoop_sidecar(name), hadoop_size_mismatch, verify_hadoop),
            (spark_checksum_file(name), spark_size_mismatch, verify_spark),
        ):
            sidecar = posixpath.join(folder, sidecar_name)
            try:
                if fs.stat(sidecar) is None:
                    continue
                checksum = fs.read(sidecar)
                why = by_size(sizes[path], checksum, sidecar)
                if why is None and sizes[path] > 0:
                    why = verify(fs.read(path), checksum, sidecar)
            except (CheckpointError, ParseError):
                # The file or its checksum vanished or cannot be read: the chain readers and
                # the next scan judge the file itself; a bad checksum file judges nothing.
                continue
            if why is not None:
                out.append((path, f"does not match {sidecar_name}: {why}"))
                break
    return out
