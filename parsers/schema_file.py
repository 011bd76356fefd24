"""State schema files: ``<store>/_metadata/schema`` (v1, v2) and ``_stateSchema/…`` (v3).

Binary, ``java.io.DataOutputStream`` conventions (big-endian ints; ``writeUTF`` = uint16 byte
length + Java *modified* UTF-8)::

    writeUTF("v<N>")
    v1: writeUTF(keyJson) writeUTF(valueJson)
    v2: chunks(keyJson) chunks(valueJson)
    v3: int32 n, then n × [writeUTF(cfName) int16 keySchemaId chunks(keyJson)
                          int16 valueSchemaId chunks(valueJson)
                          chunks(keyStateEncoderSpecJson) chunks(userKeyEncoderSchemaJson)]
    chunks(s) := int32 count, count × writeUTF(piece)   (pieces of ≤ 65535 UTF-16 units)

The whole file must be consumed; trailing bytes are :class:`CorruptData`.

Example::

    >>> empty = b'{"type":"struct","fields":[]}'
    >>> data = b"\\x00\\x02v1" + (b"\\x00\\x1d" + empty) * 2
    >>> StateSchemaFile.from_bytes(data).column_families[0].name
    'default'
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stateglass.parsers.errors import CorruptData, ParseError, Truncated
from stateglass.parsers.logs import parse_version_line
from stateglass.parsers.sparktypes import StructType, parse_datatype

SCHEMA_MAX_VERSION = 3
DEFAULT_COLUMN_FAMILY = "default"
# Spark writes "{" + 4 spaces + "}" when a column family has no user key encoder schema.
EMPTY_USER_KEY_SCHEMA = "{    }"

_U16 = struct.Struct(">H")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def decode_modified_utf8(data: bytes) -> str:
    """Decode Java's modified UTF-8 (``DataInput.readUTF``) to a Python string.

    NUL is ``C0 80`` and characters beyond the BMP are surrogate pairs of 3-byte sequences;
    lone surrogates survive as surrogate code points, as in a Java ``String``.
    """
    return _units_to_str(_utf8_units(data, 0))


def _utf8_units(data: bytes, base: int) -> list[int]:
    """UTF-16 code units of a modified UTF-8 byte string; ``base`` is for error offsets."""
    units: list[int] = []
    append = units.append
    i, n = 0, len(data)
    while i < n:
        b = data[i]
        if b < 0x80:
            append(b)
            i += 1
        elif b >> 5 == 0b110:
            if i + 1 >= n or data[i + 1] >> 6 != 0b10:
                raise CorruptData("malformed modified UTF-8 (bad 2-byte sequence)", base + i)
            append(((b & 0x1F) << 6) | (data[i + 1] & 0x3F))
            i += 2
        elif b >> 4 == 0b1110:
            if i + 2 >= n or data[i + 1] >> 6 != 0b10 or data[i + 2] >> 6 != 0b10:
                raise CorruptData("malformed modified UTF-8 (bad 3-byte sequence)", base + i)
            append(((b & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F))
            i += 3
        else:
            raise CorruptData(f"malformed modified UTF-8 (byte 0x{b:02x})", base + i)
    return units


def _units_to_str(units: list[int]) -> str:
    if all(u < 0x80 for u in units):
        return bytes(units).decode("ascii")
    # Pairs of surrogates become one character; lone ones stay as they are.
    raw = b"".join(u.to_bytes(2, "little") for u in units)
    return raw.decode("utf-16-le", "surrogatepass")


class _Reader:
    """Sequential ``DataInputStream``-style reader over bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def take(self, size: int, what: str) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            raise Truncated(
                f"schema file ends inside {what} ({len(self.data) - self.pos} of {size} bytes)",
                self.pos,
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def i16(self, what: str) -> int:
        value: int = _I16.unpack(self.take(2, what))[0]
        return value

    def i32(self, what: str) -> int:
        value: int = _I32.unpack(self.take(4, what))[0]
        return value

    def utf_units(self, what: str) -> list[int]:
        (length,) = _U16.unpack(self.take(2, f"length of {what}"))
        start = self.pos
        return _utf8_units(self.take(length, what), start)

    def utf(self, what: str) -> str:
        return _units_to_str(self.utf_units(what))

    def chunks(self, what: str) -> str:
        count = self.i32(f"chunk count of {what}")
        if count < 0:
            raise CorruptData(f"negative chunk count {count} for {what}", self.pos - 4)
        if count * 2 > len(self.data) - self.pos:
            # Every chunk needs at least its 2-byte length; fail before looping for long.
            raise Truncated(f"schema file too short for {count} chunks of {what}", self.pos)
        units: list[int] = []
        for _ in range(count):
            # Spark splits by UTF-16 units, so a surrogate pair may straddle two chunks.
            units.extend(self.utf_units(what))
        return _units_to_str(units)

    def at_end(self) -> bool:
        return self.pos == len(self.data)


@dataclass(frozen=True)
class ColumnFamilySchema:
    """Key and value schema of one column family (``"default"`` for v1/v2 files)."""

    name: str
    key_schema: StructType
    value_schema: StructType
    key_schema_id: int = 0
    value_schema_id: int = 0
    key_state_encoder_spec: Mapping[str, Any] | None = None
    user_key_encoder_schema: StructType | None = None


@dataclass(frozen=True)
class StateSchemaFile:
    """A parsed state schema file."""

    format_version: int
    column_families: tuple[ColumnFamilySchema, ...]

    @classmethod
    def from_bytes(cls, data: bytes) -> StateSchemaFile:
        """Parse a schema file of format v1, v2 or v3, to the last byte."""
        reader = _Reader(data)
        families: tuple[ColumnFamilySchema, ...]
        version = parse_version_line(reader.utf("version"), SCHEMA_MAX_VERSION, "schema file")
        if version == 1:
            families = (_default_cf(reader.utf("key schema"), reader.utf("value schema")),)
        elif version == 2:
            families = (_default_cf(reader.chunks("key schema"), reader.chunks("value schema")),)
        else:
            count = reader.i32("column family count")
            if count < 0:
                raise CorruptData(f"negative column family count {count}", reader.pos - 4)
            families = tuple(_v3_cf(reader) for _ in range(count))
        if not reader.at_end():
            raise CorruptData(
                f"{len(reader.data) - reader.pos} unexpected bytes after the v{version} schema",
                reader.pos,
            )
        return cls(version, families)

    def column_family(self, name: str) -> ColumnFamilySchema:
        """The entry for column family ``name``; KeyError if there is none."""
        for cf in self.column_families:
            if cf.name == name:
                return cf
        raise KeyError(name)


def _default_cf(key_json: str, value_json: str) -> ColumnFamilySchema:
    return ColumnFamilySchema(
        name=DEFAULT_COLUMN_FAMILY,
        key_schema=parse_struct(key_json, "key schema"),
        value_schema=parse_struct(value_json, "value schema"),
    )


def _v3_cf(reader: _Reader) -> ColumnFamilySchema:
    name = reader.utf("column family name")
    what = f"column family {name!r}"
    key_id = reader.i16(f"key schema id of {what}")
    key_json = reader.chunks(f"key schema of {what}")
    value_id = reader.i16(f"value schema id of {what}")
    value_json = reader.chunks(f"value schema of {what}")
    spec_json = reader.chunks(f"key encoder spec of {what}")
    user_key_json = reader.chunks(f"user key schema of {what}")
    spec = _json(spec_json, f"key encoder spec of {what}")
    if not isinstance(spec, dict):
        raise CorruptData(f"key encoder spec of {what} is not a JSON object")
    return ColumnFamilySchema(
        name=name,
        key_schema=parse_struct(key_json, f"key schema of {what}"),
        value_schema=parse_struct(value_json, f"value schema of {what}"),
        key_schema_id=key_id,
        value_schema_id=value_id,
        key_state_encoder_spec=spec,
        user_key_encoder_schema=_user_key_schema(user_key_json, what),
    )


def _user_key_schema(text: str, what: str) -> StructType | None:
    # Spark parses this with Try(...).toOption; "{    }" (or anything empty) means "none".
    if not text.strip() or text == EMPTY_USER_KEY_SCHEMA:
        return None
    obj = _json(text, f"user key schema of {what}")
    if isinstance(obj, dict) and not obj:
        return None
    return parse_struct(obj, f"user key schema of {what}")


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CorruptData(f"{what} is not valid JSON: {exc}") from exc


def parse_struct(schema: str | Mapping[str, Any], what: str) -> StructType:
    """Parse Spark ``StructType.json`` text (or decoded JSON) that must describe a struct."""
    obj = _json(schema, what) if isinstance(schema, str) else schema
    if not isinstance(obj, Mapping) or "type" not in obj:
        raise CorruptData(f"{what} is not a Spark struct schema: {str(obj)[:80]!r}")
    try:
        parsed = parse_datatype(obj)
    except ParseError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise CorruptData(f"{what} is not a valid Spark schema: {exc!r}") from exc
    if not isinstance(parsed, StructType):
        raise CorruptData(f"{what} is {parsed.simple_string()}, expected a struct")
    return parsed
