"""Rows rendered exactly as Spark's ``Dataset.toJSON()`` writes them (Spark 4.3, Java 17).

The State Data Source gives ``{"key":{…},"value":{…},"partition_id":N}`` per row; this
module writes the same text without a JVM. Every rule below was observed on Spark 4.3.0
(see ``docs/json-rendering.md``); in short:

* null struct fields are left out (``ignoreNullFields``), at every depth; null array
  elements and null map values are written as ``null``; duplicate field names are all
  written, in order;
* numbers as Java prints them (``1.0E-5``, ``1.0E21``; floats with ``Float.toString``,
  including Java 17's too-long digits); NaN and infinities as the strings ``"NaN"``,
  ``"Infinity"``, ``"-Infinity"``; decimals as ``BigDecimal.toString`` (``0E-10``);
* timestamps in the session time zone with **millisecond** precision,
  ``2024-01-02T03:04:05.123Z`` (micros truncated toward minus infinity); timestamp_ntz
  without a zone; dates ``yyyy-MM-dd``; years outside 0000-9999 as ``+10000``/``-0001``;
  dates and timestamps between 1582-10-05 and 1582-10-14 print as 1582-10-15 (``toJSON``
  round-trips values through ``java.sql.Date``/``Timestamp``, whose hybrid calendar lacks
  those days);
* binary as base64; intervals as ``INTERVAL '1-2' YEAR TO MONTH`` / ``INTERVAL '1
  02:03:04.5' DAY TO SECOND`` whatever the declared fields; calendar intervals as
  ``1 years 2 months 3 days 4.5 seconds``;
* map keys as the Java ``toString`` of the key (``19723`` for a date, ``[0,1]`` for a struct).

Single values are formatted by :mod:`app.render.spark_text`; this module generates, per schema,
the code that walks UnsafeRow bytes and assembles their text. Two ways in:

* :func:`state_line_encoder` — raw key/value UnsafeRow bytes straight to the JSON line (the
  fast path: one generated function per schema pair, no intermediate tuples);
  :func:`state_blob_encoder` does a whole partition into UTF-8 bytes, in compiled code
  (``stateglass.parsers._speedups``) when the schemas hold only simple types;
* :func:`row_json_encoder` — raw row bytes to the JSON object text of one struct.

Rows already decoded by :func:`stateglass.parsers.unsaferow.row_decoder` are rendered by
:mod:`stateglass.app.render.rows_to_json` (``render_row``, ``to_python``).

Example::

    line = state_line_encoder(key_schema, value_schema, zone="UTC")
    for key_bytes, value_bytes in records:
        print(line(key_bytes, value_bytes, partition_id))
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from stateglass.app.render.java_text import json_quote
from stateglass.app.render.json_codegen import fstring_literal, runtime
from stateglass.app.render.spark_text import (
    TimeZoneSpec,
    _offset_suffix,
    check_supported,
    date_json,
    day_time_interval_json,
    double_json,
    float_json,
    json_format,
    key_text,
    timestamp_json,
    timestamp_ntz_json,
    year_month_interval_json,
)
from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DecimalType,
    MapType,
    StructType,
)
from stateglass.parsers.unsaferow import (
    DecoderWriter,
    Source,
    array_element,
    emit_decode_utf8,
    emit_map_head,
    slot_code,
    slot_kind,
    var_bytes_check,
)

try:
    from stateglass.parsers import _speedups
except ImportError:  # not built, or STATEGLASS_PURE=1: generated Python does everything
    _speedups = None  # type: ignore[assignment]

__all__ = [
    "BlobEncoder",
    "ChainEncoder",
    "LineEncoder",
    "LinesEncoder",
    "RowJsonEncoder",
    "row_json_encoder",
    "state_blob_encoder",
    "state_chain_encoder",
    "state_line",
    "state_line_encoder",
    "state_lines_encoder",
    "state_prefixed_blob_encoder",
]

LineEncoder = Callable[[Any, Any, int], str]
"""``line(key_bytes, value_bytes_or_None, partition_id) -> str`` (no newline)."""
LinesEncoder = Callable[[Iterable[tuple[Any, Any]], int], list[str]]
"""``lines(pairs, partition_id) -> list[str]``: one line per ``(key, value)`` pair."""
BlobEncoder = Callable[[Iterable[tuple[Any, Any]], int], tuple[bytes, int]]
"""``blob(pairs, partition_id) -> (bytes, rows)``: UTF-8 lines, each ending in a newline."""
RowJsonEncoder = Callable[..., str]
"""``encode(buf, offset=0) -> str``: the JSON object text of one UnsafeRow."""


# Expressions (over the decoded slot value ``{v}``) giving the JSON text of fixed kinds.
_FIXED_TEXT = {
    "bool": "_TF[{v}]",
    "num": "{v}",
    "date": "_date({v})",
    "ts": "_ts({v})",
    "ntz": "_ntz({v})",
    "ym": "_ym({v})",
    "dti": "_dti({v})",
    "float": "_jf({v})",
    "double": "_jd({v})",
}


class _JsonWriter:
    """Writes functions turning UnsafeRow bytes into JSON text, one per nested type."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.values = DecoderWriter(src)  # plain decoders, for map keys
        self.functions: dict[tuple[str, DataType], str] = {}

    # --- one value ----------------------------------------------------------------------------

    def text(
        self, indent: int, dt: DataType, slots: tuple[str, ...], buf: str, base: str, end: str
    ) -> str:
        """Emit what is needed to render one non-null value; return the text expression.

        ``slots`` holds the variable with a fixed value, or the (size, relative offset)
        variables of a variable-length one.
        """
        src = self.src
        fmt = json_format(dt)
        kind = slot_kind(dt)
        if fmt == "void":
            return "_NULL"
        if kind == "decimal_compact":
            assert isinstance(dt, DecimalType)
            return f"_bd({slots[0]}, {dt.scale})"
        if fmt in _FIXED_TEXT:
            return _FIXED_TEXT[fmt].format(v=slots[0])
        size, off = slots
        if base != "0":
            src.emit(indent, f"{off} += {base}")
        if fmt == "calendar":
            return f"_calj(_cal({buf}, {off}, {size}, {end}))"
        stop = var_bytes_check(src, indent, kind.replace("_", " "), off, size, end)
        if fmt == "string":
            out = src.fresh("t")
            emit_decode_utf8(src, indent, out, off, stop, buf)
            src.emit(indent, f"{out} = _eb({out})")
            src.emit(indent, f"if '\\\\u00' in {out}: {out} = _fixu({out})")
            return out
        if fmt == "binary":
            return f"_b64({buf}[{off}:{stop}])"
        if fmt == "dec":
            assert isinstance(dt, DecimalType)
            return f"_bd(_be({buf}[{off}:{stop}]), {dt.scale})"
        out = src.fresh("t")
        src.emit(indent, f"{out} = {self.function_for('json', dt)}({buf}, {off}, {stop})")
        return out

    # --- structs ------------------------------------------------------------------------------

    def struct_unpack(
        self, indent: int, st: StructType, buf: str, base: str
    ) -> tuple[list[str], list[tuple[str, ...]]]:
        """Emit the one ``unpack_from`` of a struct's fixed region.

        Returns the null-bitset word variables and, per field, its slot variables: one
        for a fixed value, (size, relative offset) for a variable-length one, none for void.
        """
        src = self.src
        kinds = [slot_kind(f.data_type) for f in st.fields]
        if not kinds:
            return [], []
        words = (len(kinds) + 63) >> 6
        layout = "<" + "Q" * words + "".join(slot_code(k) for k in kinds)
        reader = src.const(struct.Struct(layout).unpack_from, "_S")
        nulls = [src.fresh("n") for _ in range(words)]
        slot_vars: list[tuple[str, ...]] = []
        flat = list(nulls)
        for kind in kinds:
            if kind == "void":
                slot_vars.append(())
            elif slot_code(kind) == "II":
                pair = (src.fresh("z"), src.fresh("o"))
                slot_vars.append(pair)
                flat += pair
            else:
                one = (src.fresh("v"),)
                slot_vars.append(one)
                flat += one
        src.emit(
            indent, f"{', '.join(flat)}{',' if len(flat) == 1 else ''} = {reader}({buf}, {base})"
        )
        return nulls, slot_vars

    def struct_fast(
        self,
        indent: int,
        st: StructType,
        slot_vars: list[tuple[str, ...]],
        buf: str,
        base: str,
        end: str,
    ) -> str:
        """Emit the field texts of a struct without null fields; return the f-string body.

        The body is the inside of the object, ``"a":{t1},"b":{v2}``, in f-string syntax.
        """
        pieces = []
        for field, slots in zip(st.fields, slot_vars, strict=True):
            expr = self.text(indent, field.data_type, slots, buf, base, end)
            pieces.append(f"{fstring_literal(json_quote(field.name))}:{{{expr}}}")
        return ",".join(pieces)

    def struct_slow(
        self,
        indent: int,
        st: StructType,
        nulls: list[str],
        slot_vars: list[tuple[str, ...]],
        buf: str,
        base: str,
        end: str,
        target: str,
    ) -> None:
        """Emit the general case: skip null fields, join the others into ``target``."""
        src = self.src
        parts = src.fresh("p")
        src.emit(indent, f"{parts} = []")
        for i, field in enumerate(st.fields):
            src.emit(indent, f"if not {nulls[i >> 6]} & {1 << (i & 63)}:")
            expr = self.text(indent + 1, field.data_type, slot_vars[i], buf, base, end)
            name = fstring_literal(json_quote(field.name))
            src.emit(indent + 1, f"{parts}.append(f'{name}:{{{expr}}}')")
        src.emit(indent, f"{target} = '{{' + ','.join({parts}) + '}}'")

    def struct_body(
        self, indent: int, st: StructType, buf: str, base: str, end: str, target: str
    ) -> None:
        """Emit statements leaving the JSON object text of the struct at ``base`` in ``target``."""
        src = self.src
        if not st.fields:
            src.emit(indent, f"{target} = '{{}}'")
            return
        nulls, slot_vars = self.struct_unpack(indent, st, buf, base)
        # Most rows have no null field: then one f-string makes the whole object.
        src.emit(indent, f"if not ({' | '.join(nulls)}):")
        body = self.struct_fast(indent + 1, st, slot_vars, buf, base, end)
        src.emit(indent + 1, f"{target} = f'{{{{{body}}}}}'")
        src.emit(indent, "else:")
        self.struct_slow(indent + 1, st, nulls, slot_vars, buf, base, end, target)

    # --- nested functions ---------------------------------------------------------------------

    def function_for(self, role: str, dt: DataType) -> str:
        """Name of a generated ``f(buf, base, end)``.

        Roles: ``json`` (text of a struct, array or map), ``list`` (texts of an array's
        elements) and ``keys`` (JSON-quoted ``toString`` of a map's keys).
        """
        key = (role, dt)
        name = self.functions.get(key)
        if name is None:
            name = self.src.fresh("_j")
            self.functions[key] = name
            paused = self.src.begin()
            if role == "keys":
                self._keys(name, dt)
            elif role == "list":
                assert isinstance(dt, ArrayType)
                self._list(name, dt)
            elif isinstance(dt, StructType):
                self.src.emit(0, f"def {name}(buf, base, end):")
                self.struct_body(1, dt, "buf", "base", "end", "out")
                self.src.emit(1, "return out")
            elif isinstance(dt, ArrayType):
                items = self.function_for("list", dt)
                self.src.emit(0, f"def {name}(buf, base, end):")
                self.src.emit(1, f"return '[' + ','.join({items}(buf, base, end)) + ']'")
            elif isinstance(dt, MapType):
                self._map(name, dt)
            self.src.emit(0, "")
            self.src.end(paused)
        return name

    def _list(self, name: str, at: ArrayType) -> None:
        src = self.src
        dt = at.element_type
        kind = slot_kind(dt)
        fmt = json_format(dt)
        code, size = array_element(kind)
        src.emit(0, f"def {name}(buf, base, end):")
        src.emit(1, f"n, nulls, data = _arr(buf, base, end, {size})")
        if fmt == "void":
            src.emit(1, "return ['null'] * n")
            return
        if code != "II":
            src.emit(1, f"vals = _unpack(f'<{{n}}{code}', buf, data)")
            if fmt == "num":
                src.emit(1, "out = _list(_map(_str, vals))")
            else:
                expr = self.text(2, dt, ("x",), "buf", "base", "end")
                src.emit(1, f"out = [{expr} for x in vals]")
            src.emit(1, "if nulls:")
            src.emit(2, "for i in _nullpos(nulls, n): out[i] = 'null'")
            src.emit(1, "return out")
            return
        src.emit(1, "slots = _unpack(f'<{2 * n}I', buf, data)")
        src.emit(1, "out = ['null'] * n")
        src.emit(1, "skip = set(_nullpos(nulls, n)) if nulls else ()")
        src.emit(1, "for i in range(n):")
        src.emit(2, "if i in skip: continue")
        src.emit(2, "size = slots[2 * i]")
        src.emit(2, "off = slots[2 * i + 1]")
        expr = self.text(2, dt, ("size", "off"), "buf", "base", "end")
        src.emit(2, f"out[i] = {expr}")
        src.emit(1, "return out")

    def _keys(self, name: str, at: DataType) -> None:
        src = self.src
        assert isinstance(at, ArrayType)
        dt = at.element_type
        fmt = json_format(dt)
        to_text = src.const(key_text(fmt), "_k")
        src.emit(0, f"def {name}(buf, base, end):")
        # Spark prints struct, array and binary keys from their bytes (UnsafeRow.toString).
        from_bytes = fmt in ("struct", "array", "binary")
        element = AtomicType("binary") if from_bytes else dt
        src.emit(1, f"ks = {self.values.function_for(ArrayType(element, False))}(buf, base, end)")
        # Spark never writes a null map key: one here means the bytes are damaged.
        src.emit(1, "if None in ks: raise _mapnullkey(base)")
        if fmt == "string":
            src.emit(1, "return [_q(k) for k in ks]")
        else:
            src.emit(1, f"return [_q({to_text}(k)) for k in ks]")

    def _map(self, name: str, mt: MapType) -> None:
        src = self.src
        keys = self.function_for("keys", ArrayType(mt.key_type, False))
        values = self.function_for("list", ArrayType(mt.value_type, mt.value_contains_null))
        emit_map_head(src, name, keys, values)
        src.emit(1, "return '{' + ','.join([k + ':' + v for k, v in _zip(ks, vs)]) + '}'")


def _emit_guarded_body(
    writer: _JsonWriter, st: StructType, buf: str, target: str, what: str
) -> None:
    """Emit the struct body for a top-level row held in ``buf``, wrapping foreign errors."""
    src = writer.src
    src.emit(1, f"if {buf}.__class__ is not bytes: {buf} = bytes({buf})")
    src.emit(1, "try:")
    writer.struct_body(2, st, buf, "0", f"len({buf})", target)
    src.emit(1, "except CorruptData as exc:")
    src.emit(2, f"exc.why = {what!r} + exc.why")
    src.emit(2, "raise")
    src.emit(1, "except _foreign as exc:")
    src.emit(2, f"raise _wrap(exc, 0, {what!r}) from exc")


def _emit_fast_line(
    writer: _JsonWriter, key_schema: StructType, value_schema: StructType, indent: int, done: str
) -> None:
    """Emit the no-null fast path of one line inside ``try:``; ``done`` uses the text.

    ``done`` is a format string for the statement that consumes the finished line, e.g.
    ``return {}``. Rows with nulls fall through; errors are left to the caller's except.
    """
    src = writer.src
    key_nulls, key_slots = writer.struct_unpack(indent, key_schema, "kb", "0")
    value_nulls, value_slots = writer.struct_unpack(indent, value_schema, "vb", "0")
    nulls = key_nulls + value_nulls
    src.emit(indent, f"if not ({' | '.join(nulls)}):" if nulls else "if True:")
    key_body = writer.struct_fast(indent + 1, key_schema, key_slots, "kb", "0", "len(kb)")
    value_body = writer.struct_fast(indent + 1, value_schema, value_slots, "vb", "0", "len(vb)")
    text = (
        f'f\'{{{{"key":{{{{{key_body}}}}},"value":{{{{{value_body}}}}},"partition_id":{{pid}}}}}}\''
    )
    src.emit(indent + 1, done.format(text))


@lru_cache(maxsize=256)
def _state_encoders(
    key_schema: StructType, value_schema: StructType, zone: str
) -> tuple[LineEncoder, LinesEncoder]:
    """Generate the one-line and the many-lines encoders of a (key, value) schema pair."""
    check_supported(key_schema)
    check_supported(value_schema)
    src = Source(runtime(TimeZoneSpec(zone)))
    writer = _JsonWriter(src)
    # The general function: any nulls, a missing value, errors labelled key/value row.
    src.emit(0, "def general(kb, vb, pid):")
    _emit_guarded_body(writer, key_schema, "kb", "k_", "key row: ")
    src.emit(1, 'if vb is None: return f\'{{"key":{k_},"partition_id":{pid}}}\'')
    _emit_guarded_body(writer, value_schema, "vb", "v_", "value row: ")
    src.emit(1, 'return f\'{{"key":{k_},"value":{v_},"partition_id":{pid}}}\'')
    src.emit(0, "")
    # The fast path: bytes in, no null field in key or value: one f-string for the line.
    # Anything unusual (including an error) goes to general(), which has the full story.
    src.emit(0, "def line(kb, vb, pid):")
    src.emit(1, "if kb.__class__ is not bytes or vb.__class__ is not bytes:")
    src.emit(2, "return general(kb, vb, pid)")
    src.emit(1, "try:")
    _emit_fast_line(writer, key_schema, value_schema, 2, "return {}")
    src.emit(1, "except _fast_errors:")
    src.emit(2, "pass")
    src.emit(1, "return general(kb, vb, pid)")
    src.emit(0, "")
    # The same loop inside one function saves a Python call per row.
    src.emit(0, "def lines(pairs, pid):")
    src.emit(1, "out = []")
    src.emit(1, "append = out.append")
    src.emit(1, "for kb, vb in pairs:")
    src.emit(2, "if kb.__class__ is bytes and vb.__class__ is bytes:")
    src.emit(3, "try:")
    _emit_fast_line(writer, key_schema, value_schema, 4, "append({})\ncontinue")
    src.emit(3, "except _fast_errors:")
    src.emit(4, "pass")
    src.emit(2, "append(general(kb, vb, pid))")
    src.emit(1, "return out")
    namespace = src.compile("state line encoder")
    return namespace["line"], namespace["lines"]


def state_line_encoder(
    key_schema: StructType, value_schema: StructType, zone: str = "UTC"
) -> LineEncoder:
    """``line(key_bytes, value_bytes, partition_id) -> str``: one State Data Source JSON line.

    Equivalent to Spark's ``spark.read.format("statestore").load(ckpt).toJSON()`` with
    ``spark.sql.session.timeZone=zone``: ``{"key":{…},"value":{…},"partition_id":N}``.
    ``value_bytes`` may be ``None`` (a removed key), which leaves ``"value"`` out as Spark
    leaves out null columns. Raises :class:`CorruptData` for rows that do not fit their
    schema and, when built, :class:`UnsupportedFormat` for types it cannot render.
    Generated once per (schemas, zone) and cached.

    Example::

        line = state_line_encoder(key_schema, value_schema)
        text = line(b"...", b"...", 0)  # '{"key":{"k":"a"},"value":{"count":3},"partition_id":0}'
    """
    return _state_encoders(key_schema, value_schema, zone)[0]


def state_lines_encoder(
    key_schema: StructType, value_schema: StructType, zone: str = "UTC"
) -> LinesEncoder:
    """``lines(pairs, partition_id) -> list[str]``: :func:`state_line_encoder` for many rows.

    ``pairs`` is any iterable of ``(key_bytes, value_bytes_or_None)``, such as
    :func:`parsers.hdfs_files.iter_records` of one partition's file. Same text and errors, one
    Python call less per row.
    """
    return _state_encoders(key_schema, value_schema, zone)[1]


# Type codes of the compiled renderer (enum in parsers/_speedups.c), by json_format/slot_kind.
_PLAN_CODES = {"void": 0, "bool": 1, "byte": 2, "short": 3, "int": 4, "long": 5, "string": 6}
_PLAN_STRUCT = 7
_T_DOUBLE, _T_FLOAT, _T_DATE, _T_TS, _T_NTZ, _T_DECIMAL, _T_BINARY = range(8, 15)
_T_CALL4, _T_CALL8, _T_CALLVAR = 15, 16, 17

PlanField = tuple[bytes, int, Any, Any, int, bytes]


@lru_cache(maxsize=256)
def _var_text_function(dt: DataType, zone: str) -> Callable[[bytes, int, int, int], str]:
    """``text(buf, offset, size, end)``: the generated Python text of one variable-length value.

    The compiled renderer calls it for arrays, maps, large decimals and calendar intervals:
    the same code the pure-Python encoders run for such a field, so the text is theirs.
    """
    src = Source(runtime(TimeZoneSpec(zone)))
    writer = _JsonWriter(src)
    src.emit(0, "def text(buf, off, size, end):")
    expr = writer.text(1, dt, ("size", "off"), "buf", "0", "end")
    src.emit(1, f"return {expr}")
    text: Callable[[bytes, int, int, int], str] = src.compile("compiled plan value")["text"]
    return text


def _plan_field(dt: DataType, zone: TimeZoneSpec) -> tuple[int, Any, Any, int, bytes] | None:
    """(code, sub-plan, Python text function, param, extra) of one field; None: not compiled."""
    fmt = json_format(dt)
    if isinstance(dt, StructType):
        sub = _compiled_plan(dt, zone.name)
        return None if sub is None else (_PLAN_STRUCT, sub, None, 0, b"")
    if fmt in ("num", "bool", "void", "string"):
        return _PLAN_CODES[fmt if fmt != "num" else slot_kind(dt)], None, None, 0, b""
    simple: dict[str, tuple[int, Callable[..., str]]] = {
        "double": (_T_DOUBLE, double_json),
        "float": (_T_FLOAT, float_json),
        "date": (_T_DATE, date_json),
        "ntz": (_T_NTZ, timestamp_ntz_json),
        "ym": (_T_CALL4, year_month_interval_json),
        "dti": (_T_CALL8, day_time_interval_json),
    }
    if fmt in simple:
        code, fn = simple[fmt]
        return code, None, fn, 0, b""
    if fmt == "ts":
        ts = timestamp_json(zone)
        if zone.fixed is None:  # a named zone: offsets from the zone database, in Python
            return _T_CALL8, None, ts, 0, b""
        return _T_TS, None, ts, zone.fixed, (_offset_suffix(zone.fixed) + '"').encode()
    if fmt == "binary":
        return _T_BINARY, None, None, 0, b""
    if fmt == "dec" and slot_kind(dt) == "decimal_compact":
        assert isinstance(dt, DecimalType)
        return _T_DECIMAL, None, None, dt.scale, b""
    if fmt in ("dec", "calendar", "array", "map"):
        return _T_CALLVAR, None, _var_text_function(dt, zone.name), 0, b""
    return None  # variant: not rendered at all yet


@lru_cache(maxsize=256)
def _compiled_plan(st: StructType, zone: str = "UTC") -> tuple[PlanField, ...] | None:
    """The compiled renderer's plan of a struct; None when a field needs the Python code.

    Booleans, integers, strings, void, binary, compact decimals and structs are rendered in
    C; doubles, dates and timestamps in fixed-offset zones too, but for the values whose text
    is unusual (see ``parsers/_speedups.c``), which call the Python function of the field.
    Floats, intervals, arrays, maps and large decimals call their Python function for every
    value, from the compiled loop. Only variant fields keep the whole schema in Python.
    """
    check_supported(st)
    spec = TimeZoneSpec(zone)
    fields = []
    for field in st.fields:
        entry = _plan_field(field.data_type, spec)
        if entry is None:
            return None
        try:
            name = (json_quote(field.name) + ":").encode("utf-8")
        except UnicodeEncodeError:
            return None  # a lone surrogate: the Python path reports it when writing
        fields.append((name, *entry))
    return tuple(fields)


@lru_cache(maxsize=256)
def _compiled_line_plan(key_schema: StructType, value_schema: StructType, zone: str) -> object:
    """The compiled renderer's plan of a state line, or None (no extension, or a variant)."""
    if _speedups is None:
        return None
    key_plan = _compiled_plan(key_schema, zone)
    value_plan = _compiled_plan(value_schema, zone)
    if key_plan is None or value_plan is None:
        return None
    return _speedups.compile_plan(key_plan, value_plan)


ChainEncoder = Callable[[bytes | None, list[bytes], int], "tuple[bytes, int] | None"]


@lru_cache(maxsize=256)
def state_chain_encoder(
    key_schema: StructType, value_schema: StructType, zone: str = "UTC"
) -> ChainEncoder | None:
    """``chain(snapshot, deltas, partition_id) -> (bytes, rows) | None``, or None uncompiled.

    An HDFS store's version from its decompressed files: the snapshot (or None) and the
    deltas after it, merged last record winning, removed keys left out, rendered as
    :func:`state_blob_encoder` renders the merged pairs (same lines, same order: the order
    keys first appeared). All in C, without a Python object per row. None when a stream is
    not clean: the caller then parses file by file, and the careful parser names the file.
    """
    plan = _compiled_line_plan(key_schema, value_schema, zone)
    if _speedups is None or plan is None:
        return None
    line, _ = _state_encoders(key_schema, value_schema, zone)
    render = _speedups.render_chain

    def chain(snapshot: bytes | None, deltas: list[bytes], pid: int) -> tuple[bytes, int] | None:
        result = render(plan, snapshot, deltas, pid)
        if result is None:
            return None
        parts, rows = result
        if len(parts) == 1:
            return parts[0], rows  # type: ignore[return-value]
        # Rows the plan left to Python (odd or damaged): rendered, or raised, in place.
        out: list[bytes] = []
        for part in parts:
            if isinstance(part, bytes):
                out.append(part)
            else:
                out.append(line(part[0], part[1], pid).encode("utf-8") + b"\n")
                rows += 1
        return b"".join(out), rows

    return chain


@lru_cache(maxsize=256)
def state_blob_encoder(
    key_schema: StructType, value_schema: StructType, zone: str = "UTC"
) -> BlobEncoder:
    """``blob(pairs, partition_id) -> (bytes, rows)``: :func:`state_lines_encoder` as bytes.

    The lines of many ``(key_bytes, value_bytes_or_None)`` pairs, UTF-8 encoded, each ending
    in ``\\n``; same text and errors. With ``stateglass.parsers._speedups`` built (and no variant
    field, see :func:`_compiled_plan`) the loop runs in C; a row it does not render (one
    that does not fit its schema, invalid UTF-8, …) goes through :func:`state_line_encoder`,
    which raises or renders it exactly as without the extension.

    Example::

        blob = state_blob_encoder(key_schema, value_schema)
        data, rows = blob(iter(state.items()), partition_id)
    """
    line, lines = _state_encoders(key_schema, value_schema, zone)
    plan = _compiled_line_plan(key_schema, value_schema, zone)
    if _speedups is None or plan is None:

        def blob_python(pairs: Iterable[tuple[Any, Any]], pid: int) -> tuple[bytes, int]:
            texts = lines(pairs, pid)
            if not texts:
                return b"", 0
            texts.append("")
            return "\n".join(texts).encode("utf-8"), len(texts) - 1

        return blob_python
    render = _speedups.render_lines

    def blob(pairs: Iterable[tuple[Any, Any]], pid: int) -> tuple[bytes, int]:
        it = iter(pairs)
        chunk, pending, rows = render(plan, it, pid)
        if pending is None:
            return chunk, rows
        parts = [chunk]
        while pending is not None:
            kb, vb = pending
            parts.append(line(kb, vb, pid).encode("utf-8") + b"\n")
            chunk, pending, more = render(plan, it, pid)
            parts.append(chunk)
            rows += more + 1
        return b"".join(parts), rows

    return blob


Unwrap = Callable[[bytes, bytes], "tuple[bytes, bytes | None] | None"]
PrefixedBlobEncoder = Callable[[Iterable[tuple[bytes, bytes]], int, Unwrap], tuple[bytes, int]]


@lru_cache(maxsize=256)
def state_prefixed_blob_encoder(
    key_schema: StructType, value_schema: StructType, zone: str = "UTC"
) -> PrefixedBlobEncoder:
    """``blob(stored_pairs, partition_id, unwrap) -> (bytes, rows)`` for RocksDB's pairs.

    The same as ``state_blob_encoder(...)(filter(None, starmap(unwrap, stored_pairs)), pid)``,
    where ``unwrap`` (``RowCodec.payloads``) takes the rows out of a stored pair: compiled,
    the common pair (key and value each a version byte 0 and an UnsafeRow) is rendered in C
    with the byte skipped; every other pair (another column family, a row checksum, a
    damaged row) goes through ``unwrap`` and the Python line.
    """
    base = state_blob_encoder(key_schema, value_schema, zone)
    plan = _compiled_line_plan(key_schema, value_schema, zone)
    if _speedups is None or plan is None:

        def blob_python(
            pairs: Iterable[tuple[bytes, bytes]], pid: int, unwrap: Unwrap
        ) -> tuple[bytes, int]:
            return base(filter(None, itertools.starmap(unwrap, pairs)), pid)

        return blob_python
    line, _ = _state_encoders(key_schema, value_schema, zone)
    render = _speedups.render_lines

    def blob(pairs: Iterable[tuple[bytes, bytes]], pid: int, unwrap: Unwrap) -> tuple[bytes, int]:
        it = iter(pairs)
        chunk, pending, rows = render(plan, it, pid, True)
        if pending is None:
            return chunk, rows
        parts = [chunk]
        while pending is not None:
            rows_of = unwrap(*pending)
            if rows_of is not None:
                parts.append(line(rows_of[0], rows_of[1], pid).encode("utf-8") + b"\n")
                rows += 1
            chunk, pending, more = render(plan, it, pid, True)
            parts.append(chunk)
            rows += more
        return b"".join(parts), rows

    return blob


@lru_cache(maxsize=256)
def row_json_encoder(schema: StructType, zone: str = "UTC") -> RowJsonEncoder:
    """``encode(buf, offset=0) -> str``: the JSON object text of one UnsafeRow of ``schema``.

    The row runs from ``offset`` to the end of ``buf``. Same rules and errors as
    :func:`state_line_encoder`.
    """
    check_supported(schema)
    src = Source(runtime(TimeZoneSpec(zone)))
    writer = _JsonWriter(src)
    src.emit(0, "def encode(buf, offset=0):")
    src.emit(1, "if buf.__class__ is not bytes: buf = bytes(buf)")
    src.emit(1, "try:")
    writer.struct_body(2, schema, "buf", "offset", "len(buf)", "out")
    src.emit(1, "except CorruptData: raise")
    src.emit(1, "except _foreign as exc: raise _wrap(exc, offset) from exc")
    src.emit(1, "return out")
    namespace = src.compile("row json encoder")
    encode: RowJsonEncoder = namespace["encode"]
    return encode


def state_line(key_json: str, value_json: str | None, partition_id: int) -> str:
    """Assemble a State Data Source line from the JSON texts of its key and value."""
    if value_json is None:
        return f'{{"key":{key_json},"partition_id":{partition_id}}}'
    return f'{{"key":{key_json},"value":{value_json},"partition_id":{partition_id}}}'
