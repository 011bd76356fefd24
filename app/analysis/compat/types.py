"""Spark's two schema-compatibility rules for state, on our parsed types (pure).

* :func:`compatible` is ``DataType.equalsIgnoreNameAndCompatibleNullability(new, stored)``
  (sql/api/src/main/scala/org/apache/spark/sql/types/DataType.scala): the same shape position by
  position, names ignored, a field may become *less* nullable but not more.
* :func:`avro_can_read` is what ``StateSchemaCompatibilityChecker.check`` asks Avro for
  transformWithState with ``encodingFormat=avro``: can a reader with the new value schema read
  data written with an old one, both converted by ``SchemaConverters.toAvroTypeWithDefaults``
  (every field an optional union with a null default), under Avro's ``canReadStrategy``.

:func:`differences` explains, field by field, why two structs differ.

Example::

    >>> from stateglass.parsers.sparktypes import AtomicType, StructField, StructType
    >>> old = StructType((StructField("k", AtomicType("integer")),))
    >>> new = StructType((StructField("key", AtomicType("integer")),))
    >>> compatible(new, old), new == old
    (True, False)
"""

from __future__ import annotations

from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DecimalType,
    MapType,
    StructField,
    StructType,
)


def compatible(new: DataType, stored: DataType) -> bool:
    """Spark's ``equalsIgnoreNameAndCompatibleNullability(from = new, to = stored)``."""
    if isinstance(new, ArrayType) and isinstance(stored, ArrayType):
        return (stored.contains_null or not new.contains_null) and compatible(
            new.element_type, stored.element_type
        )
    if isinstance(new, MapType) and isinstance(stored, MapType):
        return (
            (stored.value_contains_null or not new.value_contains_null)
            and compatible(new.key_type, stored.key_type)
            and compatible(new.value_type, stored.value_type)
        )
    if isinstance(new, StructType) and isinstance(stored, StructType):
        return len(new.fields) == len(stored.fields) and all(
            (s.nullable or not n.nullable) and compatible(n.data_type, s.data_type)
            for n, s in zip(new.fields, stored.fields, strict=True)
        )
    return new == stored


def same(new: StructType, stored: StructType) -> bool:
    """``StructType.equals``: names, types and nullability (metadata does not change a verdict:
    an exact match and a compatible change both pass)."""
    return new == stored


def differences(new: StructType, stored: StructType, what: str) -> list[str]:
    """One line per position where ``new`` differs from ``stored`` (names included)."""
    out: list[str] = []
    if len(new.fields) != len(stored.fields):
        out.append(
            f"{what}: {len(stored.fields)} field(s) stored, {len(new.fields)} in the new query"
        )
    for i in range(max(len(new.fields), len(stored.fields))):
        n = new.fields[i] if i < len(new.fields) else None
        s = stored.fields[i] if i < len(stored.fields) else None
        if n is None and s is not None:
            out.append(f"{what} field {i}: {_field(s)} removed")
        elif s is None and n is not None:
            out.append(f"{what} field {i}: {_field(n)} added")
        elif n is not None and s is not None and n != s:
            out.append(f"{what} field {i}: {_field(s)} -> {_field(n)}{_why(n, s)}")
    return out


def _field(f: StructField) -> str:
    return f"{f.name} {f.data_type.simple_string()}{'' if f.nullable else ' not null'}"


def _why(n: StructField, s: StructField) -> str:
    if not compatible(n.data_type, s.data_type):
        return " (type changed)"
    if n.nullable and not s.nullable:
        return " (now nullable: stored rows may not be null)"
    if n.name != s.name:
        return " (renamed: Spark ignores names)"
    return ""


# ---- Avro ---------------------------------------------------------------------------------
# Avro's reader/writer resolution (org.apache.avro.SchemaCompatibility) on the types
# SchemaConverters.toAvroType produces: which writer primitive a reader primitive accepts.
_AVRO_PRIMITIVE = {
    "boolean": "boolean",
    "byte": "int",
    "short": "int",
    "integer": "int",
    "date": "int",
    "long": "long",
    "timestamp": "long",
    "timestamp_ntz": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "bytes",
    "void": "null",
}
# Reader type -> writer types it can read (Avro's numeric promotion, string <-> bytes).
_AVRO_PROMOTIONS = {
    "long": {"int"},
    "float": {"int", "long"},
    "double": {"int", "long", "float"},
    "string": {"bytes"},
    "bytes": {"string"},
}


def _avro_kind(t: DataType) -> str:
    if isinstance(t, AtomicType):
        return _AVRO_PRIMITIVE.get(t.name, t.name)
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"  # fixed/bytes with a logical type
    if isinstance(t, ArrayType):
        return "array"
    if isinstance(t, MapType):
        return "map"
    if isinstance(t, StructType):
        return "record"
    return t.simple_string()


def avro_can_read(reader: DataType, writer: DataType) -> bool:
    """Whether data written with ``writer`` reads with ``reader`` (both with defaults)."""
    if isinstance(reader, StructType) and isinstance(writer, StructType):
        by_name = {f.name: f for f in writer.fields}
        # A reader field absent from the writer takes its default (toAvroTypeWithDefaults gives
        # every field one); a writer field absent from the reader is skipped.
        return all(
            avro_can_read(f.data_type, by_name[f.name].data_type)
            for f in reader.fields
            if f.name in by_name
        )
    if isinstance(reader, ArrayType) and isinstance(writer, ArrayType):
        return avro_can_read(reader.element_type, writer.element_type)
    if isinstance(reader, MapType) and isinstance(writer, MapType):
        # Avro maps have string keys; Spark converts only string-keyed maps.
        return reader.key_type == writer.key_type and avro_can_read(
            reader.value_type, writer.value_type
        )
    r, w = _avro_kind(reader), _avro_kind(writer)
    return r == w or w in _AVRO_PROMOTIONS.get(r, set())


def avro_differences(new: StructType, old: StructType, what: str) -> list[str]:
    """The fields whose new type cannot read the old one."""
    by_name = {f.name: f for f in old.fields}
    return [
        f"{what} field {f.name}: {by_name[f.name].data_type.simple_string()} -> "
        f"{f.data_type.simple_string()} (Avro cannot read the old type as the new one)"
        for f in new.fields
        if f.name in by_name and not avro_can_read(f.data_type, by_name[f.name].data_type)
    ]
