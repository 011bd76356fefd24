"""Spark SQL data types, parsed from the JSON Spark writes into schema files.

Example::

    >>> t = parse_datatype('{"type":"struct","fields":[{"name":"k","type":"string",'
    ...                    '"nullable":true,"metadata":{}}]}')
    >>> t.simple_string()
    'struct<k:string>'
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stateglass.parsers.errors import UnsupportedFormat

# Names Spark uses in DataType.json for types without parameters.
ATOMIC_NAMES = frozenset(
    {
        "null",
        "void",
        "boolean",
        "byte",
        "short",
        "integer",
        "long",
        "float",
        "double",
        "string",
        "binary",
        "date",
        "timestamp",
        "timestamp_ntz",
        "interval",  # CalendarIntervalType
        "variant",
    }
)

_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")
_CHAR = re.compile(r"(char|varchar)\(\s*(\d+)\s*\)")
_YM = re.compile(r"interval (year|month)(?: to (year|month))?")
_DT = re.compile(r"interval (day|hour|minute|second)(?: to (day|hour|minute|second))?")
YM_FIELDS = ("year", "month")
DT_FIELDS = ("day", "hour", "minute", "second")


class DataType:
    """Base class of every Spark type."""

    def simple_string(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class AtomicType(DataType):
    """A type without parameters; ``name`` is Spark's JSON name (``long``, ``string``, …)."""

    name: str

    def simple_string(self) -> str:
        return {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}.get(
            self.name, self.name
        )


@dataclass(frozen=True)
class DecimalType(DataType):
    precision: int
    scale: int

    def simple_string(self) -> str:
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True)
class StringLikeType(DataType):
    """``char(n)`` / ``varchar(n)``: stored exactly like ``string``."""

    kind: str
    length: int

    def simple_string(self) -> str:
        return f"{self.kind}({self.length})"


@dataclass(frozen=True)
class YearMonthIntervalType(DataType):
    start: int  # index into YM_FIELDS
    end: int

    def simple_string(self) -> str:
        if self.start == self.end:
            return f"interval {YM_FIELDS[self.start]}"
        return f"interval {YM_FIELDS[self.start]} to {YM_FIELDS[self.end]}"


@dataclass(frozen=True)
class DayTimeIntervalType(DataType):
    start: int  # index into DT_FIELDS
    end: int

    def simple_string(self) -> str:
        if self.start == self.end:
            return f"interval {DT_FIELDS[self.start]}"
        return f"interval {DT_FIELDS[self.start]} to {DT_FIELDS[self.end]}"


@dataclass(frozen=True)
class ArrayType(DataType):
    element_type: DataType
    contains_null: bool = True

    def simple_string(self) -> str:
        return f"array<{self.element_type.simple_string()}>"


@dataclass(frozen=True)
class MapType(DataType):
    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True

    def simple_string(self) -> str:
        return f"map<{self.key_type.simple_string()},{self.value_type.simple_string()}>"


@dataclass(frozen=True)
class StructField:
    name: str
    data_type: DataType
    nullable: bool = True
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class StructType(DataType):
    fields: tuple[StructField, ...] = ()

    def simple_string(self) -> str:
        inner = ",".join(f"{f.name}:{f.data_type.simple_string()}" for f in self.fields)
        return f"struct<{inner}>"

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]


def parse_datatype(text: str | Mapping[str, Any] | str) -> DataType:
    """Parse ``DataType.json`` (a JSON text, or an already-decoded object)."""
    obj: Any = text
    if isinstance(text, str):
        stripped = text.strip()
        if stripped.startswith(("{", '"')):
            try:
                obj = json.loads(stripped)
            except json.JSONDecodeError as exc:
                raise UnsupportedFormat(f"schema JSON does not parse: {exc}") from exc
    return _from_json(obj)


def _from_json(obj: Any) -> DataType:
    if isinstance(obj, str):
        return _from_name(obj)
    if not isinstance(obj, Mapping):
        raise UnsupportedFormat(f"unexpected schema JSON node {obj!r}")
    kind = obj.get("type")
    if kind == "struct":
        return StructType(
            tuple(
                StructField(
                    name=f["name"],
                    data_type=_from_json(f["type"]),
                    nullable=bool(f.get("nullable", True)),
                    metadata=f.get("metadata") or {},
                )
                for f in obj.get("fields", [])
            )
        )
    if kind == "array":
        return ArrayType(_from_json(obj["elementType"]), bool(obj.get("containsNull", True)))
    if kind == "map":
        return MapType(
            _from_json(obj["keyType"]),
            _from_json(obj["valueType"]),
            bool(obj.get("valueContainsNull", True)),
        )
    if kind == "udt":
        # A UDT is stored as its SQL type.
        return _from_json(obj["sqlType"])
    raise UnsupportedFormat(f"unknown complex type {kind!r} in schema")


def _from_name(name: str) -> DataType:
    if name in ATOMIC_NAMES:
        return AtomicType("void" if name == "null" else name)
    if name == "decimal":
        return DecimalType(10, 0)
    m = _DECIMAL.fullmatch(name)
    if m:
        return DecimalType(int(m.group(1)), int(m.group(2)))
    m = _CHAR.fullmatch(name)
    if m:
        return StringLikeType(m.group(1), int(m.group(2)))
    m = _YM.fullmatch(name)
    if m:
        start = YM_FIELDS.index(m.group(1))
        return YearMonthIntervalType(start, YM_FIELDS.index(m.group(2) or m.group(1)))
    m = _DT.fullmatch(name)
    if m:
        start = DT_FIELDS.index(m.group(1))
        return DayTimeIntervalType(start, DT_FIELDS.index(m.group(2) or m.group(1)))
    raise UnsupportedFormat(f"unknown Spark type {name!r} in schema")
