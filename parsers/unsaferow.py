"""UnsafeRow bytes → Python values, with a decoder generated (and cached) per schema.

Layout (checkpoint-format.md §6): ``[null bitset][8-byte slot per field][variable region]``,
little-endian; variable-length fields keep ``(offset << 32) | size`` in their slot, offsets
relative to the row (or array) that holds them.

A decoder is Python source written for one schema, compiled once: the fixed region of a
row is read with a single ``struct.Struct.unpack_from``, and only variable-length fields
cost more. Values come back positionally (state schemas may repeat a field name):

================================  ==========================================================
Spark type                        Python value
================================  ==========================================================
boolean                           ``bool``
byte, short, integer, long        ``int``
float, double                     ``float`` (a float is its exact float32 value)
decimal(p, s)                     ``decimal.Decimal`` with exponent ``-s`` (``str`` is Spark's)
string, char(n), varchar(n)       ``str`` (malformed UTF-8 replaced as Java does)
binary                            ``bytes``
date                              ``int`` days since 1970-01-01
timestamp, timestamp_ntz          ``int`` microseconds since the epoch
interval year to month            ``int`` months
interval day to second            ``int`` microseconds
interval (calendar)               :class:`CalendarInterval`
void                              ``None``
struct                            ``tuple``
array                             ``list``
map                               ``list`` of ``(key, value)`` pairs, in stored order
variant                           :class:`VariantVal` (the raw value and metadata bytes)
================================  ==========================================================

Dates and times stay integers: Spark's range (years -290308 to 294247) is wider than
``datetime``'s, and the JSON renderer formats them straight from the integer.

Example::

    >>> from stateglass.parsers.sparktypes import AtomicType, StructField
    >>> decode = row_decoder(StructType((StructField("k", AtomicType("string")),)))
    >>> decode(bytes.fromhex("0000000000000000" "0100000010000000" "6100000000000000"))
    ('a',)
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple

from stateglass.parsers.errors import CorruptData, UnsupportedFormat
from stateglass.parsers.java_bytes import decode_utf8
from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DayTimeIntervalType,
    DecimalType,
    MapType,
    StringLikeType,
    StructType,
    YearMonthIntervalType,
)

__all__ = [
    "CalendarInterval",
    "RowDecoder",
    "VariantVal",
    "array_element",
    "row_decoder",
    "slot_kind",
]

RowDecoder = Callable[..., tuple[Any, ...]]
"""``decode(buf, offset=0) -> tuple``: one value per schema field (see the module table)."""

MAX_LONG_DIGITS = 18  # Decimal.MAX_LONG_DIGITS: up to this precision a decimal is an int64


class CalendarInterval(NamedTuple):
    """Spark's ``CalendarInterval`` (``interval`` type): months, days and microseconds."""

    months: int
    days: int
    microseconds: int


class VariantVal(NamedTuple):
    """A ``variant`` value as stored: the encoded value and its metadata dictionary."""

    value: bytes
    metadata: bytes


# ---------------------------------------------------------------------------------------------
# What each type looks like in a slot and in an array
# ---------------------------------------------------------------------------------------------

# Fixed-width kinds: (struct code of the 8-byte row slot, code of a packed array element,
# element size). Dates and year-month intervals are int32, every timestamp/day-time interval
# an int64, as UnsafeRowWriter writes them.
_FIXED: dict[str, tuple[str, str, int]] = {
    "boolean": ("?7x", "?", 1),
    "byte": ("b7x", "b", 1),
    "short": ("h6x", "h", 2),
    "int": ("i4x", "i", 4),
    "long": ("q", "q", 8),
    "float": ("f4x", "f", 4),
    "double": ("d", "d", 8),
    "decimal_compact": ("q", "q", 8),
}
_ATOMIC_KIND = {
    "boolean": "boolean",
    "byte": "byte",
    "short": "short",
    "integer": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "date": "int",
    "timestamp": "long",
    "timestamp_ntz": "long",
    "string": "string",
    "binary": "binary",
    "interval": "calendar",
    "variant": "variant",
    "void": "void",
}


def slot_kind(dt: DataType) -> str:
    """How a value of ``dt`` is stored: a fixed kind (``int``, ``long``, …) or a variable one.

    Variable kinds (``string``, ``binary``, ``decimal_large``, ``calendar``, ``variant``,
    ``struct``, ``array``, ``map``) keep ``(offset << 32) | size`` in their slot; ``void``
    has a slot but no value.
    """
    if isinstance(dt, AtomicType):
        kind = _ATOMIC_KIND.get(dt.name)
        if kind is None:
            raise UnsupportedFormat(f"cannot decode Spark type {dt.name!r}")
        return kind
    if isinstance(dt, StringLikeType):
        return "string"
    if isinstance(dt, DecimalType):
        return "decimal_compact" if dt.precision <= MAX_LONG_DIGITS else "decimal_large"
    if isinstance(dt, YearMonthIntervalType):
        return "int"
    if isinstance(dt, DayTimeIntervalType):
        return "long"
    if isinstance(dt, StructType):
        return "struct"
    if isinstance(dt, ArrayType):
        return "array"
    if isinstance(dt, MapType):
        return "map"
    raise UnsupportedFormat(f"cannot decode Spark type {dt!r}")


def slot_code(kind: str) -> str:
    """``struct`` code reading the 8-byte slot of a field of this kind (``II`` = size, offset)."""
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed[0]
    return "8x" if kind == "void" else "II"


def array_element(kind: str) -> tuple[str, int]:
    """``(struct code, size)`` of one element of an UnsafeArrayData of this kind.

    Fixed-width elements are packed at their natural size; everything else (including
    ``void``) takes an 8-byte ``(offset << 32) | size`` slot [UnsafeArrayWriter].
    """
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed[1], fixed[2]
    return "II", 8


# ---------------------------------------------------------------------------------------------
# Runtime helpers used by the generated code
# ---------------------------------------------------------------------------------------------

_I64 = struct.Struct("<q")
_CAL = struct.Struct("<iiq")
_unpack_from = struct.unpack_from


def out_of_bounds(what: str, start: int, size: int, end: int) -> CorruptData:
    """The error for a variable-length value reaching past the row or array holding it."""
    return CorruptData(
        f"{what} of {size} bytes at byte {start} runs past the end of its row ({end})", start
    )


def array_header(buf: bytes, base: int, end: int, elem_size: int) -> tuple[int, Any, int]:
    """Check an UnsafeArrayData header; return ``(n, null words or None, element start)``."""
    if base + 8 > end:
        raise CorruptData(f"array header at byte {base} runs past the end ({end})", base)
    n = _I64.unpack_from(buf, base)[0]
    words = (n + 63) >> 6
    data = base + 8 + 8 * words
    if n < 0 or data + n * elem_size > end:
        raise CorruptData(
            f"array of {n} elements at byte {base} does not fit in {end - base} bytes", base
        )
    if not words:
        return n, None, data
    nulls = _unpack_from(f"<{words}Q", buf, base + 8)
    return n, (nulls if any(nulls) else None), data


def null_positions(nulls: tuple[int, ...], n: int) -> list[int]:
    """Indexes whose bit is set in an array's null bitset."""
    out = []
    for w, word in enumerate(nulls):
        while word:
            low = word & -word
            i = (w << 6) + low.bit_length() - 1
            if i < n:
                out.append(i)
            word ^= low
    return out


def map_split(buf: bytes, base: int, end: int) -> int:
    """Check an UnsafeMapData header; return where its value array starts."""
    if base + 8 > end:
        raise CorruptData(f"map header at byte {base} runs past the end ({end})", base)
    key_size = _I64.unpack_from(buf, base)[0]
    if key_size < 0 or base + 8 + key_size > end:
        raise CorruptData(f"map key array of {key_size} bytes at byte {base} does not fit", base)
    return base + 8 + key_size


def map_null_key(base: int) -> CorruptData:
    """The error for a map with a null key, which Spark never writes."""
    return CorruptData(f"map at byte {base} has a null key", base)


def map_sizes_differ(keys: list[Any], values: list[Any], base: int) -> CorruptData:
    """The error for a map whose key and value arrays have different lengths."""
    return CorruptData(f"map at byte {base} has {len(keys)} keys but {len(values)} values", base)


def make_decimal(unscaled: int, scale: int) -> Decimal:
    """``unscaled × 10^-scale``, exactly, keeping the scale (so ``str`` shows Spark's digits)."""
    return Decimal(f"{unscaled}E{-scale}")


def read_calendar(buf: bytes, start: int, size: int, end: int) -> CalendarInterval:
    """A 16-byte ``CalendarInterval``: int32 months, int32 days, int64 microseconds."""
    if size != 16 or start + 16 > end:
        raise CorruptData(f"calendar interval of {size} bytes at byte {start} (want 16)", start)
    return CalendarInterval(*_CAL.unpack_from(buf, start))


def read_variant(raw: bytes, start: int) -> VariantVal:
    """``int32 LE valueLength ‖ value ‖ metadata`` [UnsafeWriter.write(VariantVal)]."""
    if len(raw) < 4:
        raise CorruptData(f"variant of {len(raw)} bytes at byte {start} has no length", start)
    value_len = int.from_bytes(raw[:4], "little", signed=True)
    if not 0 <= value_len <= len(raw) - 4:
        raise CorruptData(
            f"variant value length {value_len} at byte {start} is out of range", start
        )
    return VariantVal(bytes(raw[4 : 4 + value_len]), bytes(raw[4 + value_len :]))


RUNTIME: dict[str, Any] = {
    "_oob": out_of_bounds,
    "_arr": array_header,
    "_nullpos": null_positions,
    "_mapsplit": map_split,
    "_mapsizes": map_sizes_differ,
    "_mapnullkey": map_null_key,
    "_dec": make_decimal,
    "_cal": read_calendar,
    "_variant": read_variant,
    "_u8": decode_utf8,
    "_unpack": _unpack_from,
    "_zip": zip,
    "_list": list,
    "_bytes": bytes,
    "_int_from": int.from_bytes,
    "CorruptData": CorruptData,
}


# ---------------------------------------------------------------------------------------------
# Code generation
# ---------------------------------------------------------------------------------------------


class Source:
    """Python source being written: indented lines plus the constants it refers to."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.lines: list[str] = []
        self.done: list[str] = []  # finished function definitions
        self.namespace = dict(namespace)
        self._count = 0

    def begin(self) -> list[str]:
        """Start a new function while another may be half written; returns the paused one."""
        paused = self.lines
        self.lines = []
        return paused

    def end(self, paused: list[str]) -> None:
        """Finish the current function and resume the paused one."""
        self.done += self.lines
        self.lines = paused

    def fresh(self, prefix: str) -> str:
        """A new unique identifier."""
        self._count += 1
        return f"{prefix}{self._count}"

    def const(self, value: Any, prefix: str = "_c") -> str:
        """Name a constant (a ``Struct`` method, a table, …) for the generated code."""
        name = self.fresh(prefix)
        self.namespace[name] = value
        return name

    def emit(self, indent: int, line: str) -> None:
        """Add a line (or several, separated by newlines) at ``indent`` levels."""
        for part in line.split("\n"):
            self.lines.append("    " * indent + part)

    def compile(self, label: str) -> dict[str, Any]:
        """Execute the source; return its namespace (the functions it defined)."""
        text = "\n".join(self.done + self.lines) + "\n"
        # The label names a schema, whose field names come from the checkpoint: a NUL in one
        # would make compile() refuse the file name.
        code = compile(text, f"<stateglass {label.replace(chr(0), '?')}>", "exec")
        exec(code, self.namespace)
        self.namespace["__source__"] = text
        return self.namespace


def var_bytes_check(src: Source, indent: int, what: str, off: str, size: str, end: str) -> str:
    """Emit the bounds check of a variable-length value; return its end-offset variable."""
    stop = src.fresh("e")
    src.emit(indent, f"{stop} = {off} + {size}")
    src.emit(indent, f"if {stop} > {end}: raise _oob({what!r}, {off}, {size}, {end})")
    return stop


def emit_decode_utf8(
    src: Source, indent: int, target: str, off: str, stop: str, buf: str = "buf"
) -> None:
    """``target = buf[off:stop]`` decoded as Spark would (fast path: valid UTF-8)."""
    src.emit(indent, f"{target} = {buf}[{off}:{stop}]")
    src.emit(indent, "try:")
    src.emit(indent + 1, f"{target} = {target}.decode()")
    src.emit(indent, "except UnicodeDecodeError:")
    src.emit(indent + 1, f"{target} = _u8({target})")


def emit_map_head(src: Source, name: str, keys: str, values: str) -> None:
    """Emit ``def name(buf, base, end):`` up to its checked ``ks`` and ``vs`` lists.

    ``keys`` and ``values`` name the generated functions decoding the two arrays of an
    UnsafeMapData; the caller emits the ``return``.
    """
    src.emit(0, f"def {name}(buf, base, end):")
    src.emit(1, "split = _mapsplit(buf, base, end)")
    src.emit(1, f"ks = {keys}(buf, base + 8, split)")
    src.emit(1, f"vs = {values}(buf, split, end)")
    src.emit(1, "if len(ks) != len(vs): raise _mapsizes(ks, vs, base)")
    # Spark never writes a null map key: one here means the bytes are damaged.
    src.emit(1, "if None in ks: raise _mapnullkey(base)")


class DecoderWriter:
    """Writes one function per struct, array and map type reachable from a schema."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.functions: dict[DataType, str] = {}

    def function_for(self, dt: DataType) -> str:
        """Name of the generated ``f(buf, base, end)`` decoding a struct, array or map."""
        name = self.functions.get(dt)
        if name is None:
            prefix = {"struct": "_s", "array": "_a", "map": "_m"}[slot_kind(dt)]
            name = self.src.fresh(prefix)
            self.functions[dt] = name
            paused = self.src.begin()
            if isinstance(dt, StructType):
                self._struct(name, dt)
            elif isinstance(dt, ArrayType):
                self._array(name, dt)
            elif isinstance(dt, MapType):
                self._map(name, dt)
            self.src.end(paused)
        return name

    def emit_var_value(
        self, indent: int, dt: DataType, kind: str, target: str, off: str, size: str, end: str
    ) -> None:
        """Decode a variable-length value whose absolute offset and size are in variables."""
        src = self.src
        if kind == "calendar":
            src.emit(indent, f"{target} = _cal(buf, {off}, {size}, {end})")
            return
        if kind == "void":
            src.emit(indent, f"{target} = None")
            return
        stop = var_bytes_check(src, indent, kind.replace("_", " "), off, size, end)
        if kind == "string":
            emit_decode_utf8(src, indent, target, off, stop)
        elif kind == "binary":
            src.emit(indent, f"{target} = buf[{off}:{stop}]")
        elif kind == "decimal_large":
            assert isinstance(dt, DecimalType)
            src.emit(
                indent,
                f"{target} = _dec(_int_from(buf[{off}:{stop}], 'big', signed=True), {dt.scale})",
            )
        elif kind == "variant":
            src.emit(indent, f"{target} = _variant(buf[{off}:{stop}], {off})")
        else:
            src.emit(indent, f"{target} = {self.function_for(dt)}(buf, {off}, {stop})")

    def _struct(self, name: str, st: StructType) -> None:
        src = self.src
        fields = st.fields
        kinds = [slot_kind(f.data_type) for f in fields]
        words = (len(fields) + 63) >> 6
        layout = "<" + "Q" * words + "".join(slot_code(k) for k in kinds)
        reader = src.const(struct.Struct(layout).unpack_from, "_S")
        null_vars = [f"n{w}" for w in range(words)]
        targets: list[str] = []  # per field: one variable, or size/offset pair for var kinds
        slot_vars: list[str] = list(null_vars)
        for i, kind in enumerate(kinds):
            if kind in _FIXED:
                targets.append(f"v{i}")
                slot_vars.append(f"v{i}")
            elif kind == "void":
                targets.append(f"v{i}")
            else:
                targets.append(f"v{i}")
                slot_vars += [f"v{i}", f"o{i}"]
        src.emit(0, f"def {name}(buf, base, end):")
        if not fields:
            src.emit(1, "return ()")
            src.emit(0, "")
            return
        unpack_target = ", ".join(slot_vars) + ("," if len(slot_vars) == 1 else "")
        src.emit(1, f"{unpack_target} = {reader}(buf, base)")
        for i, (field, kind) in enumerate(zip(fields, kinds, strict=True)):
            bit = f"{null_vars[i >> 6]} & {1 << (i & 63)}"
            v = targets[i]
            if kind == "void":
                src.emit(1, f"{v} = None")
            elif kind in _FIXED:
                src.emit(1, f"if {bit}: {v} = None")
                if kind == "decimal_compact":
                    dt = field.data_type
                    assert isinstance(dt, DecimalType)
                    src.emit(1, f"else: {v} = _dec({v}, {dt.scale})")
            else:
                src.emit(1, f"if {bit}: {v} = None")
                src.emit(1, "else:")
                src.emit(2, f"o{i} += base")
                self.emit_var_value(2, field.data_type, kind, v, f"o{i}", v, "end")
        src.emit(1, f"return ({', '.join(targets)},)")
        src.emit(0, "")

    def _array(self, name: str, at: ArrayType) -> None:
        src = self.src
        kind = slot_kind(at.element_type)
        code, size = array_element(kind)
        src.emit(0, f"def {name}(buf, base, end):")
        src.emit(1, f"n, nulls, data = _arr(buf, base, end, {size})")
        if kind == "void":
            src.emit(1, "return [None] * n")
        elif kind in _FIXED:
            src.emit(1, f"vals = _list(_unpack(f'<{{n}}{code}', buf, data))")
            if kind == "decimal_compact":
                assert isinstance(at.element_type, DecimalType)
                scale = at.element_type.scale
                src.emit(1, f"vals = [_dec(x, {scale}) for x in vals]")
            src.emit(1, "if nulls:")
            src.emit(2, "for i in _nullpos(nulls, n): vals[i] = None")
            src.emit(1, "return vals")
        else:
            src.emit(1, "slots = _unpack(f'<{2 * n}I', buf, data)")
            src.emit(1, "vals = [None] * n")
            src.emit(1, "skip = set(_nullpos(nulls, n)) if nulls else ()")
            src.emit(1, "for i in range(n):")
            src.emit(2, "if i in skip: continue")
            src.emit(2, "size = slots[2 * i]")
            src.emit(2, "off = base + slots[2 * i + 1]")
            self.emit_var_value(2, at.element_type, kind, "v", "off", "size", "end")
            src.emit(2, "vals[i] = v")
            src.emit(1, "return vals")
        src.emit(0, "")

    def _map(self, name: str, mt: MapType) -> None:
        keys = self.function_for(ArrayType(mt.key_type, False))
        values = self.function_for(ArrayType(mt.value_type, mt.value_contains_null))
        emit_map_head(self.src, name, keys, values)
        self.src.emit(1, "return _list(_zip(ks, vs))")
        self.src.emit(0, "")


def wrap_foreign_errors(exc: Exception, offset: int, what: str = "") -> CorruptData:
    """A ``struct``/index error inside a generated decoder, as the ``CorruptData`` it means."""
    return CorruptData(f"{what}UnsafeRow does not match its schema: {exc}", offset)


@lru_cache(maxsize=256)
def row_decoder(schema: StructType) -> RowDecoder:
    """A function ``decode(buf, offset=0) -> tuple`` for rows of ``schema``.

    ``buf`` is ``bytes`` or a ``memoryview``/``bytearray`` (copied once to ``bytes``); the
    row runs from ``offset`` to the end of ``buf``. Raises :class:`CorruptData` when an
    offset or size points outside the row, and :class:`UnsupportedFormat` (when the decoder
    is built) for a type StateGlass cannot decode.

    Example::

        decode = row_decoder(value_schema)
        count, total = decode(value_bytes)
    """
    src = Source(RUNTIME)
    writer = DecoderWriter(src)
    top = writer.function_for(schema)
    src.namespace["_top"] = src.namespace.get(top)
    src.namespace["_wrap"] = wrap_foreign_errors
    src.namespace["_foreign"] = (struct.error, IndexError, ValueError, OverflowError)
    src.emit(0, "def decode(buf, offset=0):")
    src.emit(1, "if buf.__class__ is not bytes: buf = bytes(buf)")
    src.emit(1, "try:")
    src.emit(2, f"return {top}(buf, offset, len(buf))")
    src.emit(1, "except CorruptData: raise")
    src.emit(1, "except _foreign as exc: raise _wrap(exc, offset) from exc")
    namespace = src.compile(f"decoder {schema.simple_string()[:80]}")
    decode: RowDecoder = namespace["decode"]
    return decode
