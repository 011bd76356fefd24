"""Verify the checksum files beside a scan's new files: a bit flip is a damaged file.

Each file a scan sees for the first time (or changed) is checked against Hadoop's ``.NAME.crc``
sidecar (local and HDFS file systems) and Spark 4.1+'s ``NAME.crc``, whichever exist
(:mod:`stateglass.parsers.checksums`). A mismatch is a ``ChecksumMismatch`` problem row on the
file: the health rules and the restart verdict then treat it as unreadable, as Spark does (its
``ChecksumFileSystem`` and ``ChecksumCheckpointFileManager`` refuse such a file on read). A
file without a checksum file is not judged. Files seen before are not read again: their rows
stay until the file changes.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from typing import TYPE_CHECKING

from stateglass.collectors.errors import CheckpointError
from stateglass.parsers.checksums import hadoop_sidecar, spark_checksum_file, verify_hadoop
from stateglass.parsers.checksums import verify_spark as verify_spark_checksum
from stateglass.parsers.errors import ParseError

if TYPE_CHECKING:
    from stateglass.collectors.fs import FileSystem

KIND = "ChecksumMismatch"


def verify_files(fs: FileSystem, paths: Iterable[str]) -> list[tuple[str, str]]:
    """``(path, why)`` for every file of ``paths`` whose checksum file disagrees with it."""
    out = []
    for path in sorted(paths):
        folder, name = posixpath.split(path)
        for sidecar_name, verify in (
            (hadoop_sidecar(name), verify_hadoop),
            (spark_checksum_file(name), verify_spark_checksum),
        ):
            sidecar = posixpath.join(folder, sidecar_name)
            try:
                if fs.stat(sidecar) is None:
                    continue
                why = verify(fs.read(path), fs.read(sidecar), sidecar)
            except (CheckpointError, ParseError) as exc:
                # The file or its checksum vanished or cannot be read: the chain readers and
                # the next scan judge the file itself; a bad checksum file judges nothing.
                del exc
                continue
            if why is not None:
                out.append((path, f"does not match {sidecar_name}: {why}"))
                break
    return out
