"""RocksDB state-store changelog files (``<v>.changelog``, ``<v>_<id>.changelog``) after
decompression.

========  ==========================================  =====================  ===========
version   header                                      records                end
========  ==========================================  =====================  ===========
v1        none                                        like ``.delta``        int32 -1
v2        ``writeUTF("v2")``                          ``type`` + key/value   byte 0x00
v3        ``writeUTF("v3")`` ``writeUTF(lineage)``    like ``.delta``        int32 -1
v4        ``writeUTF("v4")`` ``writeUTF(lineage)``    ``type`` + key/value   byte 0x00
========  ==========================================  =====================  ===========

Keys and values are the exact bytes Spark stores in RocksDB (with the 2-byte column-family
prefix when the store uses column families, and row checksums when those are on).
:func:`parse_changelog` keeps them as stored so that a changelog replays onto an SST
snapshot byte for byte; :func:`unwrap_delete_key` and :func:`unwrap_value_checksum` remove
row checksums afterwards. Changelogs hold one batch's changes, so :func:`parse_changelog`
materialises them; :func:`iter_changelog_records` streams plain tuples for very large ones.

Example::

    >>> log = parse_changelog(b"\\x00\\x02v2\\x01\\x00\\x00\\x00\\x01k\\x00\\x00\\x00\\x01v\\x00")
    >>> log.format_version, log.records
    (2, (ChangelogRecord(kind='put', key=b'k', value=b'v'),))
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from stateglass.parsers.errors import CorruptData, Truncated, UnsupportedFormat
from stateglass.parsers.rowchecksum import unwrap_key, unwrap_values

try:
    from stateglass.parsers import _speedups
except ImportError:  # not built, or STATEGLASS_PURE=1: parse_changelog reads every file
    _speedups = None  # type: ignore[assignment]

RecordKind = Literal["put", "delete", "merge"]

_INT = struct.Struct(">i")
_U16 = struct.Struct(">H")
# RecordType.getRecordTypeAsByte in StateStoreChangelog.scala.
TYPE_EOF = 0x00
TYPE_PUT = 0x01
TYPE_DELETE = 0x10
TYPE_MERGE = 0x11
_KINDS: dict[int, RecordKind] = {TYPE_PUT: "put", TYPE_DELETE: "delete", TYPE_MERGE: "merge"}
SUPPORTED_VERSIONS = (1, 2, 3, 4)


@dataclass(frozen=True, slots=True)
class LineageItem:
    """A (version, checkpoint unique id) the changelog builds on (checkpoint format v2)."""

    version: int
    checkpoint_unique_id: str


@dataclass(frozen=True, slots=True)
class ChangelogRecord:
    """One change: ``put`` and ``merge`` carry a value, ``delete`` has ``value=None``."""

    kind: RecordKind
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Changelog:
    """A decoded changelog file: its format version, lineage (v3/v4) and records in order."""

    format_version: int
    lineage: tuple[LineageItem, ...]
    records: tuple[ChangelogRecord, ...]

    @classmethod
    def from_bytes(cls, data: bytes) -> Changelog:
        """Same as :func:`parse_changelog`."""
        return parse_changelog(data)


def _decode_modified_utf8(raw: bytes, offset: int) -> str:
    # Java's writeUTF: NUL is C0 80 and non-BMP characters are surrogate pairs (CESU-8).
    try:
        text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeError as exc:
        raise CorruptData(f"changelog header is not modified UTF-8: {exc}", offset) from exc


def _read_utf(buf: bytes, pos: int) -> tuple[str, int] | None:
    """``DataInputStream.readUTF`` at ``pos``: (text, next position), or None at EOF."""
    if len(buf) - pos < 2:
        return None
    end = pos + 2 + _U16.unpack_from(buf, pos)[0]
    if end > len(buf):
        return None
    return _decode_modified_utf8(buf[pos + 2 : end], pos), end


def _parse_lineage(text: str, offset: int) -> tuple[LineageItem, ...]:
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise CorruptData(f"changelog lineage is not JSON: {exc}", offset) from exc
    if not isinstance(items, list):
        raise CorruptData("changelog lineage is not a JSON array", offset)
    lineage = []
    for item in items:
        version = item.get("version") if isinstance(item, dict) else None
        unique_id = item.get("checkpointUniqueId") if isinstance(item, dict) else None
        if type(version) is not int or not isinstance(unique_id, str):
            raise CorruptData(f"bad changelog lineage item {item!r}", offset)
        lineage.append(LineageItem(version, unique_id))
    return tuple(lineage)


def read_changelog_header(data: bytes) -> tuple[int, tuple[LineageItem, ...], int]:
    """Return ``(format_version, lineage, offset of the first record)``.

    Detects the version the way Spark's ``StateStoreChangelogReaderFactory`` does: read a
    ``writeUTF`` string; EOF or a string not starting with ``v`` means v1 (which has no
    header, so its records start at byte 0).
    """
    buf = data if isinstance(data, bytes) else bytes(data)
    first = _read_utf(buf, 0)
    if first is None or not first[0].startswith("v"):
        return 1, (), 0
    label, pos = first
    number = label[1:]
    if not (number.isdecimal() and len(number) < 6 and int(number) in SUPPORTED_VERSIONS):
        raise UnsupportedFormat(
            f"changelog format {label!r} is not one StateStoreChangelog v1–v4 writes", 0
        )
    version = int(number)
    if version == 1:
        # Spark's V1 reader reopens the file and reads records from byte 0.
        return 1, (), 0
    if version < 3:
        return version, (), pos
    second = _read_utf(buf, pos)
    if second is None:
        raise Truncated("changelog lineage header cut short", pos)
    text, body = second
    return version, _parse_lineage(text, pos), body


def _read_block(buf: bytes, pos: int, what: str) -> tuple[bytes, int]:
    size = len(buf)
    if size - pos < 4:
        raise Truncated(f"changelog {what} size cut short", pos)
    length = _INT.unpack_from(buf, pos)[0]
    if length < 0:
        raise CorruptData(f"negative changelog {what} size {length}", pos)
    end = pos + 4 + length
    if end > size:
        raise Truncated(f"changelog {what} cut short ({size - pos - 4} of {length} bytes)", pos)
    return buf[pos + 4 : end], end


def _iter_v1(buf: bytes, pos: int) -> Iterator[tuple[RecordKind, bytes, bytes | None]]:
    size = len(buf)
    unpack = _INT.unpack_from
    while True:
        if size - pos < 4:
            raise Truncated("changelog ends without its -1 end marker", pos)
        key_size = unpack(buf, pos)[0]
        if key_size < 0:
            if key_size != -1:
                raise CorruptData(f"negative changelog key size {key_size}", pos)
            pos += 4
            if pos != size:
                raise CorruptData(f"{size - pos} bytes follow the changelog end marker", pos)
            return
        key_end = pos + 4 + key_size
        if key_end + 4 > size:
            raise Truncated(f"changelog record of key size {key_size} cut short", pos)
        key = buf[pos + 4 : key_end]
        value_size = unpack(buf, key_end)[0]
        if value_size < 0:
            if value_size != -1:
                raise CorruptData(f"negative changelog value size {value_size}", key_end)
            yield "delete", key, None
            pos = key_end + 4
            continue
        value_end = key_end + 4 + value_size
        if value_end > size:
            raise Truncated(f"changelog record of value size {value_size} cut short", pos)
        yield "put", key, buf[key_end + 4 : value_end]
        pos = value_end


def _iter_v2(buf: bytes, pos: int) -> Iterator[tuple[RecordKind, bytes, bytes | None]]:
    size = len(buf)
    while True:
        if pos >= size:
            raise Truncated("changelog ends without its EOF record", pos)
        kind_byte = buf[pos]
        if kind_byte == TYPE_EOF:
            if pos + 1 != size:
                raise CorruptData(f"{size - pos - 1} bytes follow the changelog EOF record", pos)
            return
        kind = _KINDS.get(kind_byte)
        if kind is None:
            raise CorruptData(f"unknown changelog record type 0x{kind_byte:02x}", pos)
        key, after_key = _read_block(buf, pos + 1, "key")
        if kind == "delete":
            if size - after_key < 4:
                raise Truncated("changelog delete record cut short", after_key)
            marker = _INT.unpack_from(buf, after_key)[0]
            if marker != -1:
                raise CorruptData(f"changelog delete record has value size {marker}", after_key)
            yield kind, key, None
            pos = after_key + 4
        else:
            value, pos = _read_block(buf, after_key, "value")
            yield kind, key, value


def iter_changelog_records(data: bytes) -> Iterator[tuple[RecordKind, bytes, bytes | None]]:
    """Yield ``(kind, key, value)`` for each record of a decompressed changelog, any version.

    Raises ``UnsupportedFormat`` for an unknown version header, ``Truncated`` when the file
    stops before its end marker and ``CorruptData`` when bytes follow it. Offsets in errors
    count bytes of the decompressed stream.
    """
    buf = data if isinstance(data, bytes) else bytes(data)
    version, _, pos = read_changelog_header(buf)
    return _iter_records(buf, version, pos)


def _iter_records(
    buf: bytes, version: int, pos: int
) -> Iterator[tuple[RecordKind, bytes, bytes | None]]:
    # v3 extends v1 and v4 extends v2 with a lineage header only.
    return _iter_v1(buf, pos) if version in (1, 3) else _iter_v2(buf, pos)


def parse_changelog(data: bytes) -> Changelog:
    """Decode a whole decompressed changelog file.

    Example::

        >>> parse_changelog(b"\\xff\\xff\\xff\\xff").format_version
        1
    """
    buf = data if isinstance(data, bytes) else bytes(data)
    version, lineage, pos = read_changelog_header(buf)
    records = tuple(
        ChangelogRecord(kind, key, value) for kind, key, value in _iter_records(buf, version, pos)
    )
    return Changelog(version, lineage, records)


def changelog_pairs(data: bytes) -> list[tuple[bytes, bytes | None]] | None:
    """The records of a v1 or v3 changelog (puts and deletes, no merges) as ``(key, value)``,
    a delete's value None, read by the compiled loop: what replaying a changelog needs,
    without a record object per change. None for v2 and v4 files, without the compiled
    loop, or for a file it refuses: :func:`parse_changelog` reads those (and names what is
    wrong)."""
    if _speedups is None:
        return None
    buf = data if isinstance(data, bytes) else bytes(data)
    version, _, pos = read_changelog_header(buf)
    if version not in (1, 3):
        return None
    return _speedups.read_records(memoryview(buf)[pos:], True, True)


def unwrap_value_checksum(full_key: bytes, value: bytes, *, delimiter: bytes = b"") -> bytes:
    """Verify and strip the row checksums of a RocksDB value (§5.5); return the bare value.

    ``full_key`` is the key as stored, including any column-family prefix. ``value`` is one
    ``crc ‖ len ‖ payload`` element or several joined by the merge ``delimiter`` (``b""`` for
    4.3's default mergeOperatorVersion 2, ``b","`` for version 1); the result keeps the
    delimiter between payloads, like Spark's ``decodeAndVerifyValueRowWithChecksum``.
    """
    return unwrap_values(full_key, value, delimiter=delimiter)


def unwrap_delete_key(key: bytes) -> bytes:
    """Verify and strip the ``LE32(CRC32C(key))`` prefix of a DELETE record's key (§5.5)."""
    return unwrap_key(key)


__all__ = [
    "Changelog",
    "ChangelogRecord",
    "LineageItem",
    "RecordKind",
    "iter_changelog_records",
    "parse_changelog",
    "read_changelog_header",
    "unwrap_delete_key",
    "unwrap_value_checksum",
]
