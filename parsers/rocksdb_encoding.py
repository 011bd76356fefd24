"""RocksDB state keys and values → the encoded rows inside them (``RocksDBStateEncoder``).

This module frames bytes; it does not decode rows. It hands back UnsafeRow bytes (or Avro
datums) and the schema to decode each with, and puts decoded columns back in key order.

How a reader uses it::

    meta = RocksDBCheckpointMetadata.from_bytes(...)          # from the <v>.zip
    cf = schema_file.column_family(name)                      # ColumnFamilySchema
    layout = key_layout(cf.key_state_encoder_spec, cf.key_schema, encoding_format="unsaferow")

    for raw_key, raw_value in db.items():
        cf_id, key = split_cf_prefix(raw_key) if meta.uses_column_families else (None, raw_key)
        key_columns = layout.decode(key, decode_row)          # tuple in key_schema order
        row = decode_value(raw_value, row_checksum=ck, full_key=raw_key)      # single value
        rows = decode_values(raw_value, row_checksum=ck, full_key=raw_key)    # list state

``decode_row(payload, schema) -> Sequence`` is the caller's row decoder (UnsafeRow or Avro);
``layout.decode`` calls it once per key part. Without a decoder, ``layout.split(key)`` gives
the payloads, aligned with ``layout.parts``; each :class:`KeyPart` says which key columns
(``ordinals``) it holds, their projected ``schema``, and the ``row_schema`` its payload is
encoded with:

=================================  ======================================================
spec (``keyStateEncoderType``)     parts (after the 2-byte CF prefix, if any)
=================================  ======================================================
NoPrefixKeyStateEncoderSpec        ``key``: ``0x00 ‖ row``
PrefixKeyScanStateEncoderSpec(n)   ``LE32 len ‖ prefix (0x00 ‖ row of columns 0…n-1)``
                                   ``‖ remaining (0x00 ‖ row of the other columns)``
RangeKeyScanStateEncoderSpec(ord)  ``LE32 len ‖ range (0x00 ‖ row of one binary field per
                                   ordering column) ‖ remaining`` (omitted if no column
                                   is left); each binary = marker (0 negative, 1
                                   non-negative, 2 null) ‖ big-endian value, negative
                                   floats/doubles with all bits flipped
TimestampAsPrefix…EncoderSpec      ``timestamp (BE64 ts ^ 1<<63) ‖ 0x00 ‖ row``; the
                                   timestamp is the last key column, ``__event_time``
TimestampAsPostfix…EncoderSpec     ``0x00 ‖ row ‖ timestamp`` (both: join state format 4)
=================================  ======================================================

With ``encoding_format="avro"`` the ``key`` and ``remaining`` parts are
``0x00 ‖ LE16 schemaId ‖ datum`` (the id lands in :attr:`SplitKey.schema_id`), the prefix
and range parts ``0x00 ‖ datum``, and the range record has two nullable binary fields
(marker, value) per ordering column. Avro values come back as ``LE16 schemaId ‖ datum``;
:func:`split_schema_id` separates them.

Values: ``0x00 ‖ row`` (single) or a list of ``LE32 len ‖ 0x00 ‖ row`` elements joined by
the RocksDB merge delimiter — ``,`` before Spark 4.3 and for ``mergeOperatorVersion`` 1,
nothing for version 2. A reader whose RocksDB merges with ``,`` can mix both in one value,
so :func:`decode_values` accepts an optional ``,`` between elements and settles ambiguity
by requiring an exact parse. With row checksums (4.3+) each value or element is
``LE32 crc ‖ LE32 len ‖ payload``, ``crc = CRC32C(full RocksDB key ‖ payload)``.

The writing side (a rewrite into RocksDB) is the inverse for the layouts of stores without
column families: :meth:`KeyLayout.join` (no-prefix and prefix-scan keys, UnsafeRow
encoding), :func:`encode_row_payload`, :func:`encode_value` and :func:`encode_values` (with
their row checksums; a store with column families is rewritten with its keys as they are,
under another column family id: :func:`cf_prefix`).

Example::

    >>> from stateglass.parsers.sparktypes import parse_datatype
    >>> schema = parse_datatype('{"type":"struct","fields":[{"name":"k","type":"long",'
    ...     '"nullable":true,"metadata":{}}]}')
    >>> layout = key_layout({"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"}, schema)
    >>> layout.split(b"\\x00ROW").rows
    (b'ROW',)
    >>> decode_values(b"\\x01\\x00\\x00\\x00\\x00" b"," b"\\x01\\x00\\x00\\x00\\x00")
    (b'', b'')
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from stateglass.parsers.errors import ChecksumMismatch, CorruptData, Truncated, UnsupportedFormat
from stateglass.parsers.rowchecksum import crc32c
from stateglass.parsers.sparktypes import AtomicType, DataType, StructField, StructType

STATE_ENCODING_VERSION = 0
CF_PREFIX_BYTES = 2
MERGE_DELIMITER = 0x2C  # "," — StringAppendOperator's default delimiter

_LE16 = struct.Struct("<h")
_LE32 = struct.Struct("<i")
_CRC_LEN = struct.Struct("<Ii")
_VERSION_BYTE = bytes([STATE_ENCODING_VERSION])
_BE64 = struct.Struct(">Q")
_SIGN64 = 1 << 63

RowDecoder = Callable[[bytes, StructType], Sequence[Any]]
"""``decode_row(payload, schema)``: decode one encoded row into its column values."""

NO_PREFIX = "NoPrefixKeyStateEncoderSpec"
PREFIX_KEY_SCAN = "PrefixKeyScanStateEncoderSpec"
RANGE_KEY_SCAN = "RangeKeyScanStateEncoderSpec"
TIMESTAMP_AS_PREFIX = "TimestampAsPrefixKeyStateEncoderSpec"
TIMESTAMP_AS_POSTFIX = "TimestampAsPostfixKeyStateEncoderSpec"

ENCODING_FORMATS = ("unsaferow", "avro")


# ---------------------------------------------------------------------------------------------
# Virtual column families


def split_cf_prefix(key: bytes) -> tuple[int, bytes]:
    """Split a key of a store with virtual column families into ``(cf_id, rest)``."""
    if len(key) < CF_PREFIX_BYTES:
        raise Truncated(f"key of {len(key)} bytes has no room for the column family id", 0)
    return _LE16.unpack_from(key)[0], bytes(key[CF_PREFIX_BYTES:])


def cf_prefix(cf_id: int) -> bytes:
    """The 2-byte key prefix of virtual column family ``cf_id`` (for prefix seeks)."""
    return _LE16.pack(cf_id)


# ---------------------------------------------------------------------------------------------
# Key layouts


@dataclass(frozen=True)
class KeyPart:
    """One encoded piece of a key and the key columns it carries.

    ``role`` is ``key`` (the whole key), ``prefix``, ``range``, ``remaining`` or ``timestamp``.
    ``ordinals`` are the positions in the key schema of the columns in this part (in part
    order) and ``schema`` their projection. ``row_schema`` is what the payload is encoded
    with: ``schema`` itself, the binary range row for ``range``, or None for ``timestamp``
    (8 raw bytes, see :func:`decode_timestamp`).
    """

    role: str
    ordinals: tuple[int, ...]
    schema: StructType
    row_schema: StructType | None


@dataclass(frozen=True)
class SplitKey:
    """Payloads of a key, aligned with :attr:`KeyLayout.parts`; Avro keys add a schema id."""

    rows: tuple[bytes, ...]
    schema_id: int | None = None


class KeyLayout:
    """How one column family's keys are encoded; built by :func:`key_layout`."""

    spec_type: ClassVar[str] = ""

    def __init__(self, key_schema: StructType, encoding_format: str = "unsaferow") -> None:
        if encoding_format not in ENCODING_FORMATS:
            raise UnsupportedFormat(f"state encoding format {encoding_format!r}")
        self.key_schema = key_schema
        self.encoding_format = encoding_format
        self.parts: tuple[KeyPart, ...] = ()

    @property
    def avro(self) -> bool:
        return self.encoding_format == "avro"

    def __repr__(self) -> str:
        roles = ", ".join(p.role for p in self.parts)
        return f"<{type(self).__name__} {self.key_schema.simple_string()} [{roles}]>"

    def split(self, key: bytes) -> SplitKey:
        """Cut an encoded key (CF prefix already removed) into the payloads of its parts."""
        raise NotImplementedError

    def join(self, rows: Sequence[bytes]) -> bytes:
        """Encode UnsafeRow payloads (aligned with :attr:`parts`) into a key: the inverse of
        :meth:`split`. Only the layouts a writer needs, in the UnsafeRow encoding."""
        raise UnsupportedFormat(f"writing {self.spec_type} keys")

    def _check_joinable(self, rows: Sequence[bytes]) -> None:
        if self.avro:
            raise UnsupportedFormat(f"writing {self.spec_type} keys in Avro encoding")
        if len(rows) != len(self.parts):
            raise ValueError(f"{len(rows)} payloads for {len(self.parts)} key parts")

    def decode(self, key: bytes, decode_row: RowDecoder) -> tuple[Any, ...]:
        """Decode a key to its column values in key-schema order."""
        split = self.split(key)
        values: list[Any] = [None] * len(self.key_schema.fields)
        for part, payload in zip(self.parts, split.rows, strict=True):
            if part.row_schema is None:
                decoded: Sequence[Any] = (decode_timestamp(payload),)
            else:
                decoded = decode_row(payload, part.row_schema)
                if part.role == "range":
                    decoded = self.range_values(decoded)
            if len(decoded) != len(part.ordinals):
                raise CorruptData(
                    f"{part.role} part decoded to {len(decoded)} values, "
                    f"expected {len(part.ordinals)}"
                )
            for ordinal, value in zip(part.ordinals, decoded, strict=True):
                values[ordinal] = value
        return tuple(values)

    def range_values(self, fields: Sequence[Any]) -> tuple[Any, ...]:
        """Turn a decoded range row back into ordering-column values (range layouts only)."""
        raise TypeError(f"{type(self).__name__} has no range part")

    # -- helpers for subclasses ---------------------------------------------------------------

    def _part(
        self, role: str, ordinals: Sequence[int], row_schema: StructType | None = None
    ) -> KeyPart:
        schema = StructType(tuple(self.key_schema.fields[i] for i in ordinals))
        return KeyPart(role, tuple(ordinals), schema, schema if row_schema is None else row_schema)

    def _row(
        self, data: bytes, offset: int, what: str, with_schema_id: bool
    ) -> tuple[bytes, int | None]:
        """Strip the version byte (and for Avro the schema id) from one encoded row."""
        if not data:
            raise Truncated(f"{what} is empty (expected a version byte)", offset)
        _check_version(data[0], what, offset)
        if self.avro and with_schema_id:
            if len(data) < 3:
                raise Truncated(f"{what} has no room for its Avro schema id", offset)
            return bytes(data[3:]), _LE16.unpack_from(data, 1)[0]
        return bytes(data[1:]), None


class NoPrefixLayout(KeyLayout):
    """``NoPrefixKeyStateEncoder``: the whole key is one row."""

    spec_type = NO_PREFIX

    def __init__(self, key_schema: StructType, encoding_format: str = "unsaferow") -> None:
        super().__init__(key_schema, encoding_format)
        self.parts = (self._part("key", range(len(key_schema.fields))),)

    def split(self, key: bytes) -> SplitKey:
        row, schema_id = self._row(key, 0, "key", with_schema_id=True)
        return SplitKey((row,), schema_id)

    def join(self, rows: Sequence[bytes]) -> bytes:
        self._check_joinable(rows)
        return encode_row_payload(rows[0])


class _LengthPrefixedLayout(KeyLayout):
    """Shared framing of prefix- and range-scan keys: ``LE32 len ‖ first ‖ remaining``."""

    def _split_framed(self, key: bytes) -> SplitKey:
        if len(key) < 4:
            raise Truncated(f"key of {len(key)} bytes has no room for its length prefix", 0)
        (length,) = _LE32.unpack_from(key)
        if length < 1 or 4 + length > len(key):
            raise CorruptData(
                f"key {self.parts[0].role} length {length} does not fit a {len(key)}-byte key", 0
            )
        first, _ = self._row(key[4 : 4 + length], 4, f"key {self.parts[0].role}", False)
        rest = key[4 + length :]
        if len(self.parts) == 1:
            if rest:
                raise CorruptData(f"{len(rest)} unexpected bytes after the key", 4 + length)
            return SplitKey((first,))
        remaining, schema_id = self._row(rest, 4 + length, "key remainder", with_schema_id=True)
        return SplitKey((first, remaining), schema_id)


class PrefixKeyScanLayout(_LengthPrefixedLayout):
    """``PrefixKeyScanStateEncoder``: the first ``num_cols_prefix_key`` columns, then the rest."""

    spec_type = PREFIX_KEY_SCAN

    def __init__(
        self, key_schema: StructType, num_cols_prefix_key: int, encoding_format: str = "unsaferow"
    ) -> None:
        super().__init__(key_schema, encoding_format)
        width = len(key_schema.fields)
        if not 0 < num_cols_prefix_key <= width:
            raise CorruptData(
                f"numColsPrefixKey {num_cols_prefix_key} does not fit a {width}-column key"
            )
        self.num_cols_prefix_key = num_cols_prefix_key
        # Spark always writes the remainder, even when it has no columns (a 1-byte row).
        self.parts = (
            self._part("prefix", range(num_cols_prefix_key)),
            self._part("remaining", range(num_cols_prefix_key, width)),
        )

    def split(self, key: bytes) -> SplitKey:
        return self._split_framed(key)

    def join(self, rows: Sequence[bytes]) -> bytes:
        self._check_joinable(rows)
        prefix = encode_row_payload(rows[0])
        return _LE32.pack(len(prefix)) + prefix + encode_row_payload(rows[1])


# Byte widths of the types a range-scan ordering column may have. Spark 4.0 allows the
# numeric ones and boolean; date/timestamp are accepted here in case a later release does.
_RANGE_WIDTHS = {
    "byte": 1,
    "short": 2,
    "integer": 4,
    "long": 8,
    "float": 4,
    "double": 8,
    "boolean": 1,
    "date": 4,
    "timestamp": 8,
    "timestamp_ntz": 8,
}
NEGATIVE_MARKER, POSITIVE_MARKER, NULL_MARKER = 0, 1, 2


class RangeKeyScanLayout(_LengthPrefixedLayout):
    """``RangeKeyScanStateEncoder``: ordering columns as sortable binaries, then the rest."""

    spec_type = RANGE_KEY_SCAN

    def __init__(
        self,
        key_schema: StructType,
        ordering_ordinals: Sequence[int],
        encoding_format: str = "unsaferow",
    ) -> None:
        super().__init__(key_schema, encoding_format)
        width = len(key_schema.fields)
        ordinals = tuple(ordering_ordinals)
        if not ordinals or len(set(ordinals)) != len(ordinals):
            raise CorruptData(f"invalid orderingOrdinals {list(ordinals)}")
        for ordinal in ordinals:
            if not 0 <= ordinal < width:
                raise CorruptData(f"ordering ordinal {ordinal} outside a {width}-column key")
            if _range_width(key_schema.fields[ordinal].data_type) is None:
                field = key_schema.fields[ordinal]
                raise UnsupportedFormat(
                    f"range-scan ordering column {field.name!r} has type "
                    f"{field.data_type.simple_string()}, which Spark cannot order by"
                )
        self.ordering_ordinals = ordinals
        self.ordering_types = tuple(key_schema.fields[i].data_type for i in ordinals)
        binary = AtomicType("binary")
        if self.avro:
            range_fields = tuple(
                StructField(f"{key_schema.fields[i].name}_{kind}", binary)
                for i in ordinals
                for kind in ("marker", "value")
            )
        else:
            range_fields = tuple(StructField(key_schema.fields[i].name, binary) for i in ordinals)
        parts = [self._part("range", ordinals, StructType(range_fields))]
        remaining = [i for i in range(width) if i not in ordinals]
        if remaining:
            parts.append(self._part("remaining", remaining))
        self.parts = tuple(parts)

    def split(self, key: bytes) -> SplitKey:
        return self._split_framed(key)

    def range_values(self, fields: Sequence[Any]) -> tuple[Any, ...]:
        """Ordering-column values from the decoded range row (binary fields)."""
        if self.avro:
            if len(fields) != 2 * len(self.ordering_types):
                raise CorruptData(f"Avro range record has {len(fields)} fields")
            fields = [(fields[i] or b"") + (fields[i + 1] or b"") for i in range(0, len(fields), 2)]
        return decode_range_values(fields, self.ordering_types)


class _TimestampLayout(KeyLayout):
    """Join state format 4 keys: the key row plus the ``__event_time`` (last) column."""

    def __init__(self, key_schema: StructType, encoding_format: str = "unsaferow") -> None:
        super().__init__(key_schema, encoding_format)
        if self.avro:
            raise UnsupportedFormat(f"{self.spec_type} keys in Avro encoding")
        width = len(key_schema.fields)
        if width < 1 or key_schema.fields[-1].data_type != AtomicType("long"):
            raise CorruptData(f"{self.spec_type} needs a key ending in a long event-time column")
        self.key_part = self._part("key", range(width - 1))
        self.timestamp_part = KeyPart(
            "timestamp", (width - 1,), StructType(key_schema.fields[-1:]), None
        )


class TimestampAsPrefixLayout(_TimestampLayout):
    """``TimestampAsPrefixKeyStateEncoder``: ``BE64 ts ‖ 0x00 ‖ row`` (time-ordered index)."""

    spec_type = TIMESTAMP_AS_PREFIX

    def __init__(self, key_schema: StructType, encoding_format: str = "unsaferow") -> None:
        super().__init__(key_schema, encoding_format)
        self.parts = (self.timestamp_part, self.key_part)

    def split(self, key: bytes) -> SplitKey:
        if len(key) < 9:
            raise Truncated(f"key of {len(key)} bytes is too short for a timestamp prefix", 0)
        row, _ = self._row(key[8:], 8, "key", with_schema_id=False)
        return SplitKey((bytes(key[:8]), row))


class TimestampAsPostfixLayout(_TimestampLayout):
    """``TimestampAsPostfixKeyStateEncoder``: ``0x00 ‖ row ‖ BE64 ts`` (key-ordered)."""

    spec_type = TIMESTAMP_AS_POSTFIX

    def __init__(self, key_schema: StructType, encoding_format: str = "unsaferow") -> None:
        super().__init__(key_schema, encoding_format)
        self.parts = (self.key_part, self.timestamp_part)

    def split(self, key: bytes) -> SplitKey:
        if len(key) < 9:
            raise Truncated(f"key of {len(key)} bytes is too short for a timestamp postfix", 0)
        row, _ = self._row(key[:-8], 0, "key", with_schema_id=False)
        return SplitKey((row, bytes(key[-8:])))


def _no_prefix(spec: Mapping[str, Any], schema: StructType, fmt: str) -> KeyLayout:
    return NoPrefixLayout(schema, fmt)


def _prefix_scan(spec: Mapping[str, Any], schema: StructType, fmt: str) -> KeyLayout:
    count = spec.get("numColsPrefixKey")
    if isinstance(count, bool) or not isinstance(count, int):
        raise CorruptData(f"{PREFIX_KEY_SCAN} needs an integer numColsPrefixKey, got {count!r}")
    return PrefixKeyScanLayout(schema, count, fmt)


def _range_scan(spec: Mapping[str, Any], schema: StructType, fmt: str) -> KeyLayout:
    ordinals = spec.get("orderingOrdinals")
    if not isinstance(ordinals, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ordinals
    ):
        raise CorruptData(f"{RANGE_KEY_SCAN} needs a list of orderingOrdinals, got {ordinals!r}")
    return RangeKeyScanLayout(schema, ordinals, fmt)


def _timestamp_prefix(spec: Mapping[str, Any], schema: StructType, fmt: str) -> KeyLayout:
    return TimestampAsPrefixLayout(schema, fmt)


def _timestamp_postfix(spec: Mapping[str, Any], schema: StructType, fmt: str) -> KeyLayout:
    return TimestampAsPostfixLayout(schema, fmt)


KEY_LAYOUTS: dict[str, Callable[[Mapping[str, Any], StructType, str], KeyLayout]] = {
    NO_PREFIX: _no_prefix,
    PREFIX_KEY_SCAN: _prefix_scan,
    RANGE_KEY_SCAN: _range_scan,
    TIMESTAMP_AS_PREFIX: _timestamp_prefix,
    TIMESTAMP_AS_POSTFIX: _timestamp_postfix,
}
"""``keyStateEncoderType`` → layout factory ``(spec, key_schema, encoding_format)``."""


def key_layout(
    spec: Mapping[str, Any] | None,
    key_schema: StructType,
    *,
    encoding_format: str = "unsaferow",
    num_cols_prefix_key: int = 0,
) -> KeyLayout:
    """The layout for a key encoder spec (a v3 schema file's ``key_state_encoder_spec``).

    Schema files v1/v2 carry no spec: pass ``spec=None`` and the operator metadata's
    ``num_cols_prefix_key`` (session windows use a prefix scan; everything else none).
    """
    if spec is None:
        if num_cols_prefix_key:
            return PrefixKeyScanLayout(key_schema, num_cols_prefix_key, encoding_format)
        return NoPrefixLayout(key_schema, encoding_format)
    kind = spec.get("keyStateEncoderType")
    factory = KEY_LAYOUTS.get(kind) if isinstance(kind, str) else None
    if factory is None:
        raise UnsupportedFormat(f"unknown key state encoder {kind!r}")
    return factory(spec, key_schema, encoding_format)


# ---------------------------------------------------------------------------------------------
# Range-scan and timestamp columns


def _range_width(data_type: DataType) -> int | None:
    if isinstance(data_type, AtomicType):
        return _RANGE_WIDTHS.get(data_type.name)
    return None


def decode_range_values(fields: Sequence[Any], types: Sequence[DataType]) -> tuple[Any, ...]:
    """Decode range-scan binaries (``marker ‖ big-endian value``) to Python values.

    Integral types (and date/timestamp, as days/microseconds) give ints, float/double give
    floats, a null marker gives None.
    """
    if len(fields) != len(types):
        raise CorruptData(f"range row has {len(fields)} fields for {len(types)} ordering columns")
    return tuple(_range_value(f, t, i) for i, (f, t) in enumerate(zip(fields, types, strict=True)))


def _range_value(encoded: Any, data_type: DataType, index: int) -> Any:
    width = _range_width(data_type)
    name = data_type.simple_string()
    if width is None:
        raise UnsupportedFormat(f"range-scan ordering column of type {name}")
    if not isinstance(encoded, (bytes, bytearray, memoryview)):
        raise CorruptData(f"range column {index} is not binary: {encoded!r}")
    data = bytes(encoded)
    if not data:
        if name == "boolean":
            # Spark 4.0's encoder writes nothing for a boolean column and cannot read it back.
            raise UnsupportedFormat("range-scan boolean ordering column without bytes")
        raise Truncated(f"range column {index} is empty (expected a marker byte)")
    marker = data[0]
    if marker == NULL_MARKER:
        return None
    if marker not in (NEGATIVE_MARKER, POSITIVE_MARKER):
        raise CorruptData(f"range column {index} has unknown marker 0x{marker:02x}")
    if len(data) != 1 + width:
        raise CorruptData(f"range column {index} ({name}) has {len(data) - 1} value bytes")
    body = data[1:]
    if name in ("float", "double"):
        if marker == NEGATIVE_MARKER:
            # Negative floats are stored with every bit flipped so that they sort correctly.
            body = bytes(b ^ 0xFF for b in body)
        return struct.unpack(">f" if width == 4 else ">d", body)[0]
    if name == "boolean":
        return body != b"\x00"
    return int.from_bytes(body, "big", signed=True)


def decode_timestamp(data: bytes) -> int:
    """Decode a timestamp-encoder key part: big-endian long with the sign bit flipped."""
    if len(data) != 8:
        raise CorruptData(f"timestamp key part has {len(data)} bytes, expected 8")
    value: int = _BE64.unpack(data)[0] ^ _SIGN64
    return value - (1 << 64) if value >= _SIGN64 else value


# ---------------------------------------------------------------------------------------------
# Values


def decode_value(
    value: bytes, *, row_checksum: bool = False, full_key: bytes | None = None
) -> bytes:
    """Payload of a single value: the UnsafeRow bytes (Avro: ``LE16 schemaId ‖ datum``).

    With ``row_checksum`` (offset-log conf ``rowChecksum.enabled``) the value is
    ``LE32 crc ‖ LE32 len ‖ payload`` and ``full_key`` (the RocksDB key, CF prefix included)
    is needed to verify it.
    """
    data = bytes(value)
    offset = 0
    if row_checksum:
        key = _require_key(full_key)
        end, why = _checked_element(data, 0, key)
        if end is None:
            raise why if isinstance(why, Exception) else CorruptData(f"value: {why}", 0)
        if end != len(data):
            raise CorruptData(
                f"{len(data) - end} unexpected bytes after the checksummed value", end
            )
        data, offset = data[8:], 8
    if not data:
        raise Truncated("value is empty (expected a version byte)", offset)
    _check_version(data[0], "value", offset)
    return data[1:]


def decode_values(
    value: bytes, *, row_checksum: bool = False, full_key: bytes | None = None
) -> tuple[bytes, ...]:
    """Payloads of a list value (``ListState``, join format 4), in list order.

    Elements may be separated by ``,`` or by nothing, in any mix (see the module doc).
    """
    data = bytes(value)
    if not data:
        return ()
    if row_checksum:
        key = _require_key(full_key)

        def parse_at(pos: int) -> tuple[int | None, str | Exception]:
            end, why = _checked_element(data, pos, key)
            if end is None:
                return None, why
            inner_end, inner_why = _plain_element(data, pos + 8, end)
            return (end, "") if inner_end == end else (None, inner_why)

        starts = _frame(data, parse_at)
        return tuple(data[s + 8 + 5 : e] for s, e in starts)

    def parse_plain(pos: int) -> tuple[int | None, str | Exception]:
        return _plain_element(data, pos, len(data))

    return tuple(data[s + 5 : e] for s, e in _frame(data, parse_plain))


def encode_row_payload(row: bytes) -> bytes:
    """``0x00 ‖ row``: one UnsafeRow as Spark's encoders store it (``encodeUnsafeRow``)."""
    return _VERSION_BYTE + row


def encode_value(payload: bytes, *, row_checksum: bool = False, full_key: bytes = b"") -> bytes:
    """A single value as RocksDB stores it: the inverse of :func:`decode_value`.

    With ``row_checksum`` it is ``LE32 crc ‖ LE32 len ‖ 0x00 ‖ row``, the checksum taken over
    ``full_key`` (the RocksDB key, CF prefix included) and the encoded row.
    """
    encoded = _VERSION_BYTE + payload
    if not row_checksum:
        return encoded
    crc = crc32c(encoded, crc32c(full_key))
    return _CRC_LEN.pack(crc, len(encoded)) + encoded


def encode_values(
    payloads: Sequence[bytes],
    *,
    row_checksum: bool = False,
    full_key: bytes = b"",
    delimiter: bytes = b",",
) -> bytes:
    """A list value as RocksDB stores it once merged: the inverse of :func:`decode_values`.

    Each element is ``LE32 len ‖ 0x00 ‖ row`` (with ``row_checksum``, wrapped as
    :func:`encode_value` wraps a value), joined by the merge ``delimiter``.
    """
    elements = []
    for payload in payloads:
        element = _LE32.pack(1 + len(payload)) + _VERSION_BYTE + payload
        if row_checksum:
            element = _CRC_LEN.pack(crc32c(element, crc32c(full_key)), len(element)) + element
        elements.append(element)
    return delimiter.join(elements)


def split_schema_id(payload: bytes) -> tuple[int, bytes]:
    """Split an Avro value payload into ``(schema_id, datum)``."""
    if len(payload) < 2:
        raise Truncated("Avro value has no room for its schema id", 0)
    return _LE16.unpack_from(payload)[0], bytes(payload[2:])


def _require_key(full_key: bytes | None) -> bytes:
    if full_key is None:
        raise ValueError("full_key is required to verify row checksums")
    return bytes(full_key)


def _check_version(version: int, what: str, offset: int) -> None:
    if version != STATE_ENCODING_VERSION:
        raise UnsupportedFormat(
            f"{what} has state encoding version {version}; StateGlass reads version "
            f"{STATE_ENCODING_VERSION} (was it written by a newer Spark?)",
            offset,
        )


def _plain_element(data: bytes, pos: int, limit: int) -> tuple[int | None, str | Exception]:
    """Parse ``LE32 len ‖ 0x00 ‖ row`` at ``pos``; return its end, or None and why not."""
    if limit - pos < 4:
        return None, "list element length cut short"
    (length,) = _LE32.unpack_from(data, pos)
    end = pos + 4 + length
    if length < 1:
        return None, f"list element length {length} is not positive"
    if end > limit:
        return None, f"list element of {length} bytes runs past the value's end"
    if data[pos + 4] != STATE_ENCODING_VERSION:
        return None, f"list element has state encoding version {data[pos + 4]}"
    return end, ""


def _checked_element(data: bytes, pos: int, key: bytes) -> tuple[int | None, str | Exception]:
    """Parse and verify ``LE32 crc ‖ LE32 len ‖ payload`` at ``pos``."""
    if len(data) - pos < 8:
        return None, "checksummed element header cut short"
    stored, length = _CRC_LEN.unpack_from(data, pos)
    end = pos + 8 + length
    if length < 1 or end > len(data):
        return None, f"checksummed element length {length} does not fit the value"
    computed = crc32c(data[pos + 8 : end], crc32c(key))
    if computed != stored:
        return None, ChecksumMismatch(
            f"row checksum: stored 0x{stored:08x} != computed 0x{computed:08x}", pos
        )
    return end, ""


def _frame(
    data: bytes, parse_at: Callable[[int], tuple[int | None, str | Exception]]
) -> list[tuple[int, int]]:
    """Find the element boundaries of a list value; return ``(start, end)`` per element.

    An element may be followed directly by the next one or by a ``,`` first. Every start
    reachable from 0 is parsed once; the value is valid if some chain of elements ends
    exactly at the last byte. Where both readings work, the ``,`` one wins.
    """
    size = len(data)
    ends: dict[int, int | None] = {}
    reasons: dict[int, str | Exception] = {}
    todo = [0]
    while todo:
        start = todo.pop()
        if start in ends:
            continue
        end, why = parse_at(start)
        ends[start] = end
        reasons[start] = why
        if end is not None and end < size:
            todo.append(end)
            if data[end] == MERGE_DELIMITER:
                todo.append(end + 1)
    good: dict[int, bool] = {}
    for start in sorted(ends, reverse=True):
        end = ends[start]
        good[start] = end is not None and (
            end == size
            or (data[end] == MERGE_DELIMITER and good.get(end + 1, False))
            or good.get(end, False)
        )
    if not good[0]:
        raise _framing_error(data, ends, reasons)
    elements = []
    start = 0
    while True:
        end = ends[start]
        assert end is not None  # good[start] guarantees it
        elements.append((start, end))
        if end == size:
            return elements
        start = end + 1 if data[end] == MERGE_DELIMITER and good.get(end + 1, False) else end


def _framing_error(
    data: bytes, ends: Mapping[int, int | None], reasons: Mapping[int, str | Exception]
) -> Exception:
    # Report the first failure along the greedy reading, which is what a person would check.
    start = 0
    while True:
        end = ends.get(start)
        if end is None:
            why = reasons.get(start, "list element cut short")
            if isinstance(why, Exception):
                return why
            return CorruptData(f"list value: {why}", start)
        if end + 1 in ends and data[end] == MERGE_DELIMITER:
            start = end + 1
        elif end in ends:
            start = end
        else:
            return Truncated("list value ends inside an element", end)
