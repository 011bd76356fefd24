"""Checksum files written beside checkpoint files, and their verification (pure).

Two kinds (``docs/formats.md``):

- Hadoop's ``ChecksumFileSystem`` sidecar ``.NAME.crc`` (local and HDFS file systems; every
  file Spark writes there gets one): ``b"crc\\0"``, a big-endian int ``bytesPerChecksum``
  (512), then one big-endian CRC-32 (zlib's) per chunk of that many bytes.
- Spark 4.1+'s ``NAME.crc`` (``ChecksumCheckpointFileManager``, with
  ``spark.sql.streaming.checkpoint.fileChecksum.enabled`` and state store checkpoint format
  v2): one JSON object, ``{"algorithm":"CRC32C","value":<signed int>,"mainFileSize":N,...}``.

Example::

    problem = verify_hadoop(data, sidecar_bytes)   # None when the file is whole
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass

from stateglass.parsers.errors import CorruptData

HADOOP_MAGIC = b"crc\x00"


def hadoop_sidecar(name: str) -> str:
    """The name of Hadoop's checksum file for ``name``."""
    return f".{name}.crc"


def spark_checksum_file(name: str) -> str:
    """The name of Spark's checksum file for ``name``."""
    return f"{name}.crc"


@dataclass(frozen=True)
class HadoopCrc:
    bytes_per_checksum: int
    crcs: tuple[int, ...]

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<crc>") -> HadoopCrc:
        if len(data) < 8 or data[:4] != HADOOP_MAGIC or (len(data) - 8) % 4:
            raise CorruptData("not a Hadoop checksum file (magic crc\\0, 4-byte CRCs)", 0, path)
        (per,) = struct.unpack(">i", data[4:8])
        if per <= 0:
            raise CorruptData(f"bytesPerChecksum {per} is not positive", 4, path)
        count = (len(data) - 8) // 4
        return cls(per, struct.unpack(f">{count}I", data[8:]))


def hadoop_size_mismatch(size: int, sidecar: bytes, path: str = "<crc>") -> str | None:
    """Why a file of ``size`` bytes cannot match its Hadoop sidecar, before reading it."""
    crc = HadoopCrc.from_bytes(sidecar, path)
    per = crc.bytes_per_checksum
    chunks = (size + per - 1) // per
    if chunks != len(crc.crcs):
        return f"{size} bytes make {chunks} chunks of {per}, its .crc has {len(crc.crcs)}"
    return None


def spark_size_mismatch(size: int, checksum: bytes, path: str = "<crc>") -> str | None:
    """Why a file of ``size`` bytes cannot match Spark's checksum file, before reading it."""
    record = SparkChecksum.from_json(checksum, path)
    if size != record.main_file_size:
        return f"size {size} differs from {record.main_file_size} in its checksum file"
    return None


def verify_hadoop(data: bytes, sidecar: bytes, path: str = "<crc>") -> str | None:
    """Why ``data`` does not match its Hadoop sidecar, or None when it does."""
    mismatch = hadoop_size_mismatch(len(data), sidecar, path)
    if mismatch is not None:
        return mismatch
    crc = HadoopCrc.from_bytes(sidecar, path)
    per = crc.bytes_per_checksum
    view = memoryview(data)
    for i, expected in enumerate(crc.crcs):
        if zlib.crc32(view[i * per : (i + 1) * per]) != expected:
            return f"CRC-32 of bytes {i * per}..{min(len(data), (i + 1) * per) - 1} differs"
    return None


@dataclass(frozen=True)
class SparkChecksum:
    algorithm: str
    value: int
    main_file_size: int

    @classmethod
    def from_json(cls, text: bytes, path: str = "<crc>") -> SparkChecksum:
        try:
            doc = json.loads(text)
            return cls(str(doc["algorithm"]), int(doc["value"]), int(doc["mainFileSize"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptData(f"not a Spark checksum file ({exc})", 0, path) from exc


def verify_spark(data: bytes, checksum: bytes, path: str = "<crc>") -> str | None:
    """Why ``data`` does not match Spark's checksum file, or None when it does."""
    import google_crc32c

    record = SparkChecksum.from_json(checksum, path)
    if record.algorithm.upper() != "CRC32C":
        return None  # an algorithm we do not know: not judged
    if len(data) != record.main_file_size:
        return f"size {len(data)} differs from {record.main_file_size} in its checksum file"
    # Java's int is signed; CRC32C is unsigned.
    if google_crc32c.value(data) != record.value & 0xFFFFFFFF:
        return f"CRC32C {google_crc32c.value(data)} differs from {record.value & 0xFFFFFFFF}"
    return None


def spark_checksum_json(data: bytes, timestamp_ms: int) -> bytes:
    """Spark 4.1+'s ``<file>.crc`` for ``data``, as ``ChecksumCheckpointFileManager`` writes it
    (``value`` is Java's signed int of the CRC32C)."""
    import google_crc32c

    crc = google_crc32c.value(data)
    signed = crc - (1 << 32) if crc >= 1 << 31 else crc
    doc = {
        "algorithm": "CRC32C",
        "value": signed,
        "mainFileSize": len(data),
        "timestampMs": timestamp_ms,
        "creator": {"executorId": "driver", "taskInfo": ""},
    }
    return json.dumps(doc, separators=(",", ":")).encode()
