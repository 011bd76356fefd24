"""Records of HDFS-backed state-store files (``.delta``, ``.snapshot``) after decompression.

Stream (``DataOutputStream``, ints big-endian)::

    record := keySize:int32 key[keySize] valueSize:int32 value[valueSize]   put
            | keySize:int32 key[keySize] -1:int32                           remove (.delta only)
    file   := record* -1:int32

:func:`iter_records` yields plain ``(key, value)`` tuples rather than :class:`Record` objects:
building a frozen dataclass costs about three times as much as a tuple, and a 1M-row
snapshot is read on every refresh. Wrap them with ``Record(*pair)`` where a typed object helps.

Example::

    >>> stream = b"\\x00\\x00\\x00\\x01k\\x00\\x00\\x00\\x08vvvvvvvv\\xff\\xff\\xff\\xff"
    >>> list(iter_records(stream))
    [(b'k', b'vvvvvvvv')]
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from stateglass.parsers.errors import CorruptData, ParseError, Truncated
from stateglass.parsers.rowchecksum import unwrap_key, unwrap_single, wrap_single

try:
    from stateglass.parsers import _speedups
except ImportError:  # not built, or STATEGLASS_PURE=1: the pure-Python loops below
    _speedups = None  # type: ignore[assignment]

_INT = struct.Struct(">i")
EOF_MARKER = -1
DELETE_MARKER = -1


@dataclass(frozen=True, slots=True)
class Record:
    """One put (``value`` set) or remove (``value is None``) of a state-store file."""

    key: bytes
    value: bytes | None

    @property
    def is_delete(self) -> bool:
        """True for a remove record (only found in ``.delta`` files)."""
        return self.value is None


def _shift(exc: ParseError, base: int) -> None:
    # The checksum helpers count offsets within one key or value; report them in the stream.
    exc.offset = base + (exc.offset or 0)


def iter_records(
    data: bytes, *, allow_deletes: bool = True, row_checksum: bool = False
) -> Iterator[tuple[bytes, bytes | None]]:
    """Yield ``(key, value)`` for each record, ``value`` None for a remove; check the end.

    Pass ``allow_deletes=False`` for ``.snapshot`` files, whose records are all puts.
    Pass ``row_checksum=True`` when the offset-log conf
    ``spark.sql.streaming.stateStore.rowChecksum.enabled`` is ``"true"`` (Spark 4.3+): each
    value's ``LE32 CRC32C`` prefix (and each removed key's) is verified and stripped.

    Like Spark, a value whose size is not a multiple of 8 is cut to ``(size // 8) * 8``
    bytes (pre-2.3 writers appended 4 junk bytes); with row checksums the cut is applied
    after stripping the prefix, as Spark 4.3 does. Offsets in errors count bytes of the
    decompressed stream.
    """
    buf = data if isinstance(data, bytes) else bytes(data)
    size = len(buf)
    unpack = _INT.unpack_from
    pos = 0
    while True:
        if size - pos < 4:
            raise Truncated("record stream ends without its -1 end marker", pos)
        key_size = unpack(buf, pos)[0]
        if key_size < 0:
            if key_size != EOF_MARKER:
                raise CorruptData(f"negative key size {key_size}", pos)
            pos += 4
            if pos != size:
                raise CorruptData(f"{size - pos} bytes follow the -1 end marker", pos)
            return
        key_start = pos + 4
        key_end = key_start + key_size
        if key_end + 4 > size:
            raise Truncated(f"record of key size {key_size} cut short", pos)
        value_size = unpack(buf, key_end)[0]
        key = buf[key_start:key_end]
        value_start = key_end + 4
        if value_size < 0:
            # Spark reads any negative size as a remove, but it only ever writes -1.
            if value_size != DELETE_MARKER:
                raise CorruptData(f"negative value size {value_size}", key_end)
            if not allow_deletes:
                raise CorruptData("remove record in a snapshot (only puts allowed)", pos)
            if row_checksum:
                try:
                    key = unwrap_key(key)
                except ParseError as exc:
                    _shift(exc, key_start)
                    raise
            yield key, None
            pos = value_start
            continue
        value_end = value_start + value_size
        if value_end > size:
            raise Truncated(f"record of value size {value_size} cut short", pos)
        if row_checksum:
            try:
                value = unwrap_single(key, buf[value_start:value_end])
            except ParseError as exc:
                _shift(exc, value_start)
                raise
            yield key, value[: len(value) & ~7]
        else:
            yield key, buf[value_start : value_start + (value_size & ~7)]
        pos = value_end


def read_records(
    data: bytes, *, allow_deletes: bool = True, row_checksum: bool = False
) -> list[tuple[bytes, bytes | None]]:
    """All records of a stream as a list: :func:`iter_records`, faster for whole files.

    The common case (no row checksums, well-formed stream) runs as one tight loop that
    builds the list directly (compiled when ``stateglass.parsers._speedups`` is built); anything
    unusual is handed to :func:`iter_records`, which raises the precise error.
    """
    if row_checksum:
        return list(iter_records(data, allow_deletes=allow_deletes, row_checksum=True))
    if _speedups is not None:
        records = _speedups.read_records(data, allow_deletes)
        if records is not None:
            return records
    # No compiled loop, or a stream it refuses: the Python one finds and names the problem.
    return _read_records_python(data, allow_deletes)


def _read_records_python(data: bytes, allow_deletes: bool) -> list[tuple[bytes, bytes | None]]:
    """:func:`read_records` without row checksums, in pure Python."""
    buf = data if isinstance(data, bytes) else bytes(data)
    size = len(buf)
    unpack = _INT.unpack_from
    out: list[tuple[bytes, bytes | None]] = []
    append = out.append
    pos = key_size = 0
    try:
        while True:
            key_size = unpack(buf, pos)[0]
            if key_size < 0:
                break
            key_end = pos + 4 + key_size
            value_size = unpack(buf, key_end)[0]
            if value_size < 0:
                if value_size != DELETE_MARKER or not allow_deletes:
                    break
                append((buf[pos + 4 : key_end], None))
                pos = key_end + 4
                continue
            pos = key_end + 4 + value_size
            if pos > size:
                break
            append(
                (
                    buf[key_end - key_size : key_end],
                    buf[key_end + 4 : key_end + 4 + (value_size & ~7)],
                )
            )
    except struct.error:
        pass  # ran off the end: iter_records below says exactly where
    if pos + 4 == size and key_size == EOF_MARKER:
        return out
    # Not a clean end: let the careful parser find and name the problem.
    return list(iter_records(buf, allow_deletes=allow_deletes))


def read_record_keys(
    data: bytes, *, allow_deletes: bool = True, row_checksum: bool = False
) -> tuple[list[bytes], list[bytes], bool]:
    """``(put keys, removed keys, ordered)`` of a stream, without copying any value.

    For counting keys, where values are never looked at: slicing them out is most of the
    cost of :func:`read_records`. ``ordered`` is False when a key is both put and removed in
    the stream; the order of its records then matters and the caller must replay
    :func:`read_records` instead. Errors are those of :func:`iter_records`.
    """
    if row_checksum:
        records = read_records(data, allow_deletes=allow_deletes, row_checksum=True)
        put_keys = [k for k, v in records if v is not None]
        removed = [k for k, v in records if v is None]
        return put_keys, removed, not removed or set(removed).isdisjoint(put_keys)
    if _speedups is not None:
        split = _speedups.read_record_keys(data, allow_deletes)
        if split is not None:
            puts, dels = split
            return puts, dels, not dels or set(dels).isdisjoint(puts)
    return _read_record_keys_python(data, allow_deletes)


def _read_record_keys_python(
    data: bytes, allow_deletes: bool
) -> tuple[list[bytes], list[bytes], bool]:
    """:func:`read_record_keys` without row checksums, in pure Python."""
    buf = data if isinstance(data, bytes) else bytes(data)
    size = len(buf)
    unpack = _INT.unpack_from
    puts: list[bytes] = []
    dels: list[bytes] = []
    put, remove = puts.append, dels.append
    pos = key_size = 0
    try:
        while True:
            key_size = unpack(buf, pos)[0]
            if key_size < 0:
                break
            key_end = pos + 4 + key_size
            value_size = unpack(buf, key_end)[0]
            if value_size < 0:
                if value_size != DELETE_MARKER or not allow_deletes:
                    break
                remove(buf[pos + 4 : key_end])
                pos = key_end + 4
                continue
            pos = key_end + 4 + value_size
            if pos > size:
                break
            put(buf[key_end - key_size : key_end])
    except struct.error:
        pass  # ran off the end: iter_records below says exactly where
    if not (pos + 4 == size and key_size == EOF_MARKER):
        list(iter_records(buf, allow_deletes=allow_deletes))  # raises the precise error
        raise CorruptData("record stream does not parse", pos)  # not reached for valid bytes
    return puts, dels, not dels or set(dels).isdisjoint(puts)


def encode_records(rows: Iterable[tuple[bytes, bytes]], *, row_checksum: bool = False) -> bytes:
    """A ``.snapshot`` record stream of ``rows`` (all puts), as Spark's
    ``HDFSBackedStateStoreProvider.writeSnapshotFile`` writes it before compression.

    With ``row_checksum`` each value gets its ``LE32(CRC32C(key ‖ value))`` prefix (§2.5).

    >>> list(iter_records(encode_records([(b"k", b"vvvvvvvv")])))
    [(b'k', b'vvvvvvvv')]
    """
    pack = _INT.pack
    out: list[bytes] = []
    for key, value in rows:
        stored = wrap_single(key, value) if row_checksum else value
        out += (pack(len(key)), key, pack(len(stored)), stored)
    out.append(pack(EOF_MARKER))
    return b"".join(out)


def strip_hdfs_row_checksum(key: bytes, value: bytes) -> bytes:
    """Verify and strip the ``LE32(CRC32C(key ‖ row))`` prefix of a 4.3 HDFS value (§2.5).

    ``value`` must be the full value as stored (not cut to a multiple of 8);
    :func:`iter_records` with ``row_checksum=True`` does this for a whole file.
    """
    return unwrap_single(key, value)


def strip_hdfs_key_checksum(key: bytes) -> bytes:
    """Verify and strip the ``LE32(CRC32C(key))`` prefix of a removed key (rowChecksum on)."""
    return unwrap_key(key)
