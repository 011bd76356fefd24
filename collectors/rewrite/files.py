"""Writing one state file of a rewrite's destination: compressed, with Spark's checksum file."""

from __future__ import annotations

import os

from stateglass.collectors.errors import RewriteError, RewriteRefused
from stateglass.collectors.rewrite.base import WriteTarget
from stateglass.parsers.checksums import spark_checksum_file, spark_checksum_json
from stateglass.parsers.compression import compress
from stateglass.parsers.errors import UnsupportedFormat


def write_bytes(path: str, data: bytes) -> None:
    """``data`` at ``path``, its directory made: the destination is a fresh temporary tree, so
    nothing else writes there and a plain write suffices."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise not_written(path, exc) from exc


def not_written(path: str, exc: OSError) -> RewriteError:
    """The one line for a write the destination's file system refused (full, read-only…)."""
    return RewriteError(path, f"cannot write: {exc.strerror or exc}; nothing was left at DST")


def write_state_file(path: str, stream: bytes, target: WriteTarget) -> list[str]:
    """``stream`` compressed with the target's codec at ``path``, plus Spark's ``<file>.crc``
    when the destination uses file checksums; the paths written."""
    try:
        data = compress(target.codec, stream)
    except UnsupportedFormat as exc:
        raise RewriteRefused(path, exc.why) from exc
    write_bytes(path, data)
    if not target.file_checksum:
        return [path]
    crc = os.path.join(os.path.dirname(path), spark_checksum_file(os.path.basename(path)))
    write_bytes(crc, spark_checksum_json(data, target.timestamp_ms))
    return [path, crc]
