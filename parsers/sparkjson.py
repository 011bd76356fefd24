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

Three ways in:

* :func:`state_line_encoder` — raw key/value UnsafeRow bytes straight to the JSON line (the
  fast path: one generated function per schema pair, no intermediate tuples);
* :func:`row_json_encoder` — raw row bytes to the JSON object text of one struct;
* :func:`render_row` / :func:`to_python` — from rows already decoded by
  :func:`parsers.unsaferow.row_decoder`.

Example::

    line = state_line_encoder(key_schema, value_schema, zone="UTC")
    for key_bytes, value_bytes in records:
        print(line(key_bytes, value_bytes, partition_id))
"""

from __future__ import annotations

import binascii
import datetime as _dt
import json
import re
import struct
import zlib
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any
from json.encoder import encode_basestring
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from parsers.errors import CorruptData, UnsupportedFormat
from parsers.javatext import (
    bigdecimal_to_string,
    fix_unicode_escapes,
    java_double_to_string,
    java_float_to_string,
    java_int_hex,
    java_long_hex,
    json_quote,
    murmur3_hash_bytes,
)
from parsers.sparktypes import (
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
from parsers.unsaferow import (
    RUNTIME,
    CalendarInterval,
    Source,
    _DecoderWriter,
    array_element,
    emit_decode_utf8,
    slot_code,
    slot_kind,
    var_bytes_check,
    wrap_foreign_errors,
)
from parsers.unsafewriter import encode_array, encode_row

__all__ = [
    "JsonRenderer",
    "LineEncoder",
    "RowJsonEncoder",
    "TimeZoneSpec",
    "json_format",
    "render_row",
    "row_json_encoder",
    "state_line",
    "state_line_encoder",
    "to_python",
]

LineEncoder = Callable[[Any, Any, int], str]
"""``line(key_bytes, value_bytes_or_None, partition_id) -> str`` (no newline)."""
RowJsonEncoder = Callable[..., str]
"""``encode(buf, offset=0) -> str``: the JSON object text of one UnsafeRow."""
JsonRenderer = Callable[[tuple[Any, ...]], str]
"""``render(row_tuple) -> str``: the JSON object text of a decoded row."""


# ---------------------------------------------------------------------------------------------
# Dates, timestamps and intervals
# ---------------------------------------------------------------------------------------------

_EPOCH_ORDINAL = 719163  # date(1970, 1, 1).toordinal()
_MIN_PY_DAY = -719162  # 0001-01-01
_MAX_PY_DAY = 2932896  # 9999-12-31
# Proleptic-Gregorian days Julian calendars skip; Spark's rebase sends them to 1582-10-15.
_GAP_FIRST_DAY, _GAP_LAST_DAY, _GREGORIAN_START = -141437, -141428, -141427
_MICROS_PER_DAY = 86_400_000_000


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a proleptic-Gregorian day number, for any year (H. Hinnant)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


def _plain_date(days: int) -> str:
    """``uuuu-MM-dd`` (java.time: 4-digit years padded, ``+`` above 9999, ``-`` below 0)."""
    if _MIN_PY_DAY <= days <= _MAX_PY_DAY:
        return _dt.date.fromordinal(days + _EPOCH_ORDINAL).isoformat()
    y, m, d = _civil_from_days(days)
    year = f"+{y}" if y > 9999 else (f"-{-y:04d}" if y < 0 else f"{y:04d}")
    return f"{year}-{m:02d}-{d:02d}"


_DATE_CACHE: dict[int, str] = {}


def date_json(days: int) -> str:
    """JSON text of a ``date`` (days since 1970-01-01), e.g. ``"2024-01-02"``."""
    text = _DATE_CACHE.get(days)
    if text is None:
        shown = _GREGORIAN_START if _GAP_FIRST_DAY <= days <= _GAP_LAST_DAY else days
        text = f'"{_plain_date(shown)}"'
        if len(_DATE_CACHE) > 100_000:
            _DATE_CACHE.clear()
        _DATE_CACHE[days] = text
    return text


def _offset_suffix(seconds: int) -> str:
    """Java's ``XXX`` offset: ``Z``, ``+05:30``, or ``-07:52:58`` when seconds are set."""
    if seconds == 0:
        return "Z"
    sign = "-" if seconds < 0 else "+"
    h, rest = divmod(abs(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h:02d}:{m:02d}" + (f":{s:02d}" if s else "")


_FIXED_ZONE = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")
_UTC_NAMES = {"UTC", "Z", "GMT", "UT", "ETC/UTC", "ETC/GMT", "ETC/UCT", "UCT", "ZULU", "UNIVERSAL"}


class TimeZoneSpec:
    """A session time zone: ``UTC``, a fixed offset (``+05:30``, ``GMT+1``) or an IANA name.

    ``offset_at(epoch_seconds)`` gives the zone's UTC offset in seconds at that instant.
    Named zones use the Python ``zoneinfo`` database; instants outside years 1-9999 use the
    offset at the nearest end of that range.
    """

    def __init__(self, zone: str = "UTC") -> None:
        self.name = zone
        self.fixed: int | None = None
        self._zone: ZoneInfo | None = None
        text = zone.strip()
        if text.upper() in _UTC_NAMES:
            self.fixed = 0
            return
        m = _FIXED_ZONE.fullmatch(text)
        if m:
            sign, hours, minutes, seconds = m.groups()
            total = int(hours) * 3600 + int(minutes or 0) * 60 + int(seconds or 0)
            self.fixed = -total if sign == "-" else total
            return
        try:
            self._zone = ZoneInfo(text)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise UnsupportedFormat(f"unknown session time zone {zone!r}") from exc

    _LOW = -62135596800  # 0001-01-01T00:00:00Z
    _HIGH = 253402300799  # 9999-12-31T23:59:59Z

    def offset_at(self, epoch_seconds: int) -> int:
        """UTC offset in seconds at an instant."""
        if self.fixed is not None:
            return self.fixed
        assert self._zone is not None
        sec = min(max(epoch_seconds, self._LOW + 86400), self._HIGH - 86400)
        offset = _dt.datetime.fromtimestamp(sec, self._zone).utcoffset()
        return int(offset.total_seconds()) if offset is not None else 0


def _clock(seconds_of_day: int) -> str:
    h, rest = divmod(seconds_of_day, 3600)
    m, s = divmod(rest, 60)
    return f"{h:02d}:{m:02d}:{s:02d}"


def timestamp_json(zone: TimeZoneSpec) -> Callable[[int], str]:
    """A function: microseconds since the epoch → JSON text in ``zone``, millisecond precision.

    Spark's default JSON ``timestampFormat`` is ``yyyy-MM-dd'T'HH:mm:ss.SSSXXX``. The text up
    to the seconds is cached per second, as state rows repeat window bounds a lot.
    """
    cache: dict[int, tuple[str, str]] = {}
    gap_start = _GAP_FIRST_DAY * 86400
    gap_end = (_GAP_LAST_DAY + 1) * 86400

    def head(sec: int) -> tuple[str, str]:
        # toJSON round-trips through java.sql.Timestamp; the JVM's default zone (UTC on our
        # runners) decides which instants fall in the 1582 gap.
        if gap_start <= sec < gap_end:
            sec += (_GREGORIAN_START - sec // 86400) * 86400
        offset = zone.offset_at(sec)
        days, rest = divmod(sec + offset, 86400)
        return f'"{_plain_date(days)}T{_clock(rest)}', f'{_offset_suffix(offset)}"'

    def ts(micros: int) -> str:
        sec, us = divmod(micros, 1_000_000)
        parts = cache.get(sec)
        if parts is None:
            parts = head(sec)
            if len(cache) > 100_000:
                cache.clear()
            cache[sec] = parts
        return f"{parts[0]}.{us // 1000:03d}{parts[1]}"

    return ts


def timestamp_ntz_json(micros: int) -> str:
    """JSON text of a ``timestamp_ntz``: local date-time, millisecond precision, no zone."""
    days, rest = divmod(micros, _MICROS_PER_DAY)
    sec, us = divmod(rest, 1_000_000)
    return f'"{_plain_date(days)}T{_clock(sec)}.{us // 1000:03d}"'


def year_month_interval_json(months: int) -> str:
    """``"INTERVAL '1-2' YEAR TO MONTH"`` (always both fields, as Spark 4.3 prints them)."""
    sign = "-" if months < 0 else ""
    a = abs(months)
    return f"\"INTERVAL '{sign}{a // 12}-{a % 12}' YEAR TO MONTH\""


def _seconds_text(micros: int) -> str:
    """``BigDecimal.valueOf(micros, 6).stripTrailingZeros().toPlainString()``."""
    sign = "-" if micros < 0 else ""
    whole, frac = divmod(abs(micros), 1_000_000)
    return f"{sign}{whole}.{frac:06d}".rstrip("0") if frac else f"{sign}{whole}"


def day_time_interval_json(micros: int) -> str:
    """``"INTERVAL '1 02:03:04.5' DAY TO SECOND"`` (always DAY TO SECOND)."""
    sign = "-" if micros < 0 else ""
    days, rest = divmod(abs(micros), _MICROS_PER_DAY)
    h, rest = divmod(rest, 3_600_000_000)
    m, rest = divmod(rest, 60_000_000)
    s, frac = divmod(rest, 1_000_000)
    sec = f"{s:02d}." + f"{frac:06d}".rstrip("0") if frac else f"{s:02d}"
    return f"\"INTERVAL '{sign}{days} {h:02d}:{m:02d}:{sec}' DAY TO SECOND\""


def _java_div(a: int, b: int) -> tuple[int, int]:
    """Java's truncating ``/`` and ``%``."""
    q = abs(a) // b
    q = -q if a < 0 else q
    return q, a - q * b


def calendar_interval_text(iv: CalendarInterval) -> str:
    """``IntervalUtils.toMultiUnitsString``: ``1 years 2 months 3 days 4 hours 5.5 seconds``."""
    months, days, micros = iv
    if not (months or days or micros):
        return "0 seconds"
    units: list[str] = []

    def unit(value: int, name: str) -> None:
        if value:
            units.append(f"{value} {name}")

    if months:
        years, rest = _java_div(months, 12)
        unit(years, "years")
        unit(rest, "months")
    unit(days, "days")
    if micros:
        hours, rest = _java_div(micros, 3_600_000_000)
        unit(hours, "hours")
        minutes, rest = _java_div(rest, 60_000_000)
        unit(minutes, "minutes")
        if rest:
            units.append(f"{_seconds_text(rest)} seconds")
    return " ".join(units)


def calendar_interval_json(iv: CalendarInterval) -> str:
    """JSON text of a calendar interval (``interval`` type)."""
    return json_quote(calendar_interval_text(iv))


# ---------------------------------------------------------------------------------------------
# Numbers, strings, binary
# ---------------------------------------------------------------------------------------------

_INF = float("inf")
_NON_FINITE = {"NaN": '"NaN"', "Infinity": '"Infinity"', "-Infinity": '"-Infinity"'}


def double_json(x: float) -> str:
    """JSON text of a double (Jackson quotes NaN and the infinities)."""
    text = java_double_to_string(x)
    return _NON_FINITE.get(text, text) if text[-1] in "yN" else text


def float_json(x: float) -> str:
    """JSON text of a float (``Float.toString`` of the float32 value)."""
    text = java_float_to_string(x)
    return _NON_FINITE.get(text, text) if text[-1] in "yN" else text


def binary_json(raw: bytes) -> str:
    """Jackson's ``writeBinary``: base64 (standard alphabet, padded, no line feeds)."""
    return f'"{binascii.b2a_base64(raw, newline=False).decode("ascii")}"'


def decimal_json(value: Decimal) -> str:
    """JSON number text of a decoded decimal (``BigDecimal.toString``)."""
    return str(value)


# ---------------------------------------------------------------------------------------------
# Map keys: Spark writes keyArray.get(i).toString
# ---------------------------------------------------------------------------------------------

_ARRAY_DATA = "org.apache.spark.sql.catalyst.expressions.UnsafeArrayData@"


def struct_key_text(raw: bytes) -> str:
    """``UnsafeRow.toString``: the row's 8-byte words in hex, ``[0,1,1800000002,7978]``."""
    words = struct.unpack_from(f"<{len(raw) // 8}q", raw) if len(raw) >= 8 else ()
    return "[" + ",".join(java_long_hex(w) for w in words) + "]"


def array_key_text(raw: bytes) -> str:
    """``Object.toString`` of an UnsafeArrayData: class name ``@`` its Murmur3 hash."""
    return _ARRAY_DATA + java_int_hex(murmur3_hash_bytes(raw, 42))


def binary_key_text(raw: bytes) -> str:
    """``byte[].toString`` is ``[B@`` and an identity hash no one can reproduce.

    We print ``[B@`` and the CRC-32 of the bytes: stable, and as unlike Spark as Spark is
    unlike itself from one run to the next.
    """
    return f"[B@{zlib.crc32(raw):x}"


def json_format(dt: DataType) -> str:
    """How a value of ``dt`` is written: ``num``, ``bool``, ``string``, ``date``, ``ts``, …"""
    if isinstance(dt, AtomicType):
        return {
            "boolean": "bool",
            "byte": "num",
            "short": "num",
            "integer": "num",
            "long": "num",
            "float": "float",
            "double": "double",
            "date": "date",
            "timestamp": "ts",
            "timestamp_ntz": "ntz",
            "string": "string",
            "binary": "binary",
            "interval": "calendar",
            "void": "void",
            "variant": "variant",
        }[dt.name]
    if isinstance(dt, StringLikeType):
        return "string"
    if isinstance(dt, DecimalType):
        return "dec"
    if isinstance(dt, YearMonthIntervalType):
        return "ym"
    if isinstance(dt, DayTimeIntervalType):
        return "dti"
    return slot_kind(dt)  # struct, array, map


def _key_text(fmt: str) -> Callable[[Any], str]:
    """Java ``toString`` of a decoded map key (struct/array/binary keys take raw bytes)."""
    table: dict[str, Callable[[Any], str]] = {
        "string": str,
        "bool": lambda v: "true" if v else "false",
        "num": str,
        "date": str,
        "ts": str,
        "ntz": str,
        "ym": str,
        "dti": str,
        "float": java_float_to_string,
        "double": java_double_to_string,
        "dec": str,
        "calendar": calendar_interval_text,
        "binary": binary_key_text,
        "struct": struct_key_text,
        "array": array_key_text,
    }
    found = table.get(fmt)
    if found is None:
        raise UnsupportedFormat(f"Spark does not allow {fmt} map keys")
    return found


def _check_supported(dt: DataType) -> None:
    """Refuse, when building a renderer, types whose JSON we do not produce yet."""
    fmt = json_format(dt)
    if fmt == "variant":
        raise UnsupportedFormat("JSON rendering of variant values is not supported yet")
    if isinstance(dt, StructType):
        for f in dt.fields:
            _check_supported(f.data_type)
    elif isinstance(dt, ArrayType):
        _check_supported(dt.element_type)
    elif isinstance(dt, MapType):
        _key_text(json_format(dt.key_type))
        _check_supported(dt.key_type)
        _check_supported(dt.value_type)


# ---------------------------------------------------------------------------------------------
# Generated bytes → JSON encoders
# ---------------------------------------------------------------------------------------------


def fstring_literal(text: str) -> str:
    """``text`` escaped for the literal part of a single-quoted Python f-string."""
    out = []
    for ch in text:
        if ch in "{}":
            out.append(ch * 2)
        elif ch in "\\'":
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


# What a struct/slice/int conversion raises on damaged bytes (wrapped as CorruptData).
_FOREIGN = (struct.error, IndexError, ValueError, OverflowError)


def _signed_big_endian(raw: bytes) -> int:
    return int.from_bytes(raw, "big", signed=True)


def _runtime(zone: TimeZoneSpec) -> dict[str, Any]:
    ns = dict(RUNTIME)
    ns.update(
        {
            "_TF": ("false", "true"),
            "_date": date_json,
            "_ts": timestamp_json(zone),
            "_ntz": timestamp_ntz_json,
            "_ym": year_month_interval_json,
            "_dti": day_time_interval_json,
            "_jf": float_json,
            "_jd": double_json,
            "_bd": bigdecimal_to_string,
            # json's C quoting equals Jackson's but for the case of \\u00xx hex digits.
            "_eb": encode_basestring,
            "_fixu": fix_unicode_escapes,
            "_be": _signed_big_endian,
            "_NULL": "null",
            "_b64": binary_json,
            "_calj": calendar_interval_json,
            "_q": json_quote,
            "_map": map,
            "_str": str,
            "_foreign": _FOREIGN,
            "_fast_errors": (CorruptData, *_FOREIGN),
            "_wrap": wrap_foreign_errors,
            "CorruptData": CorruptData,
        }
    )
    return ns


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
        self.values = _DecoderWriter(src)  # plain decoders, for map keys
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
        src.emit(indent, f"{', '.join(flat)}{',' if len(flat) == 1 else ''} = {reader}({buf}, {base})")
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
        for field, slots in zip(st.fields, slot_vars):
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
        to_text = src.const(_key_text(fmt), "_k")
        src.emit(0, f"def {name}(buf, base, end):")
        if fmt in ("struct", "array", "binary"):
            # Spark prints these from the key's bytes (UnsafeRow/UnsafeArrayData.toString).
            raw = self.values.function_for(ArrayType(AtomicType("binary"), False))
            src.emit(1, f"return [_q({to_text}(k)) for k in {raw}(buf, base, end)]")
        else:
            values = self.values.function_for(ArrayType(dt, False))
            src.emit(1, f"return [_q({to_text}(k)) for k in {values}(buf, base, end)]")

    def _map(self, name: str, mt: MapType) -> None:
        src = self.src
        keys = self.function_for("keys", ArrayType(mt.key_type, False))
        values = self.function_for("list", ArrayType(mt.value_type, mt.value_contains_null))
        src.emit(0, f"def {name}(buf, base, end):")
        src.emit(1, "split = _mapsplit(buf, base, end)")
        src.emit(1, f"ks = {keys}(buf, base + 8, split)")
        src.emit(1, f"vs = {values}(buf, split, end)")
        src.emit(1, "if len(ks) != len(vs):")
        src.emit(
            2, "raise CorruptData(f'map at byte {base} has {len(ks)} keys but {len(vs)} values', base)"
        )
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
    src.emit(2, "raise _wrap(exc, 0) from exc")


@lru_cache(maxsize=256)
def state_line_encoder(
    key_schema: StructType, value_schema: StructType, zone: str = "UTC"
) -> LineEncoder:
    """``line(key_bytes, value_bytes, partition_id) -> str``: one State Data Source JSON line.

    Equivalent to Spark's ``spark.read.format("statestore").load(ckpt).toJSON()`` with
    ``spark.sql.session.timeZone=zone``: ``{"key":{…},"value":{…},"partition_id":N}``.
    ``value_bytes`` may be ``None`` (a removed key), which leaves ``"value"`` out as Spark
    leaves out null columns. Raises :class:`CorruptData` for rows that do not fit their
    schema and, when built, :class:`UnsupportedFormat` for types it cannot render.

    Example::

        line = state_line_encoder(key_schema, value_schema)
        text = line(b"...", b"...", 0)  # '{"key":{"k":"a"},"value":{"count":3},"partition_id":0}'
    """
    _check_supported(key_schema)
    _check_supported(value_schema)
    src = Source(_runtime(TimeZoneSpec(zone)))
    writer = _JsonWriter(src)
    # The general function: any nulls, a missing value, errors labelled key/value row.
    src.emit(0, "def general(kb, vb, pid):")
    _emit_guarded_body(writer, key_schema, "kb", "k_", "key row: ")
    src.emit(1, "if vb is None: return f'{{\"key\":{k_},\"partition_id\":{pid}}}'")
    _emit_guarded_body(writer, value_schema, "vb", "v_", "value row: ")
    src.emit(1, "return f'{{\"key\":{k_},\"value\":{v_},\"partition_id\":{pid}}}'")
    src.emit(0, "")
    # The fast path: bytes in, no null field in key or value: one f-string for the line.
    # Anything unusual (including an error) goes to general(), which has the full story.
    src.emit(0, "def line(kb, vb, pid):")
    src.emit(1, "if kb.__class__ is not bytes or vb.__class__ is not bytes:")
    src.emit(2, "return general(kb, vb, pid)")
    src.emit(1, "try:")
    key_nulls, key_slots = writer.struct_unpack(2, key_schema, "kb", "0")
    value_nulls, value_slots = writer.struct_unpack(2, value_schema, "vb", "0")
    nulls = key_nulls + value_nulls
    src.emit(2, f"if not ({' | '.join(nulls)}):" if nulls else "if True:")
    key_body = writer.struct_fast(3, key_schema, key_slots, "kb", "0", "len(kb)")
    value_body = writer.struct_fast(3, value_schema, value_slots, "vb", "0", "len(vb)")
    src.emit(
        3,
        f"return f'{{{{\"key\":{{{{{key_body}}}}},\"value\":{{{{{value_body}}}}},"
        "\"partition_id\":{pid}}}'",
    )
    src.emit(1, "except _fast_errors:")
    src.emit(2, "pass")
    src.emit(1, "return general(kb, vb, pid)")
    namespace = src.compile("state line encoder")
    line: LineEncoder = namespace["line"]
    return line


@lru_cache(maxsize=256)
def row_json_encoder(schema: StructType, zone: str = "UTC") -> RowJsonEncoder:
    """``encode(buf, offset=0) -> str``: the JSON object text of one UnsafeRow of ``schema``.

    The row runs from ``offset`` to the end of ``buf``. Same rules and errors as
    :func:`state_line_encoder`.
    """
    _check_supported(schema)
    src = Source(_runtime(TimeZoneSpec(zone)))
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


# ---------------------------------------------------------------------------------------------
# Decoded tuples → JSON text / Python structures
# ---------------------------------------------------------------------------------------------


def _value_renderer(dt: DataType, zone: TimeZoneSpec) -> Callable[[Any], str]:
    """JSON text of one decoded (non-null) value of ``dt``."""
    fmt = json_format(dt)
    simple: dict[str, Callable[[Any], str]] = {
        "bool": lambda v: "true" if v else "false",
        "num": str,
        "float": float_json,
        "double": double_json,
        "dec": decimal_json,
        "string": json_quote,
        "binary": binary_json,
        "date": date_json,
        "ntz": timestamp_ntz_json,
        "ym": year_month_interval_json,
        "dti": day_time_interval_json,
        "calendar": lambda v: calendar_interval_json(CalendarInterval(*v)),
        "void": lambda v: "null",
    }
    if fmt in simple:
        return simple[fmt]
    if fmt == "ts":
        return timestamp_json(zone)
    if isinstance(dt, StructType):
        return _struct_renderer(dt, zone)
    if isinstance(dt, ArrayType):
        element = _value_renderer(dt.element_type, zone)
        return lambda v: "[" + ",".join("null" if x is None else element(x) for x in v) + "]"
    if isinstance(dt, MapType):
        key = _tuple_key_text(dt.key_type)
        value = _value_renderer(dt.value_type, zone)
        return lambda v: (
            "{" + ",".join(f"{key(k)}:{'null' if x is None else value(x)}" for k, x in v) + "}"
        )
    raise UnsupportedFormat(f"JSON rendering of {dt!r} values is not supported yet")


def _tuple_key_string(dt: DataType) -> Callable[[Any], str]:
    """Java ``toString`` of a decoded map key (structs and arrays re-encoded to bytes)."""
    fmt = json_format(dt)
    text = _key_text(fmt)
    if isinstance(dt, StructType):
        struct_type = dt
        return lambda k: text(encode_row(struct_type, k))
    if isinstance(dt, ArrayType):
        element_type = dt.element_type
        return lambda k: text(encode_array(element_type, k))
    if fmt == "calendar":
        return lambda k: text(CalendarInterval(*k))
    return text


def _tuple_key_text(dt: DataType) -> Callable[[Any], str]:
    """JSON-quoted Java ``toString`` of a decoded map key."""
    string = _tuple_key_string(dt)
    return lambda k: json_quote(string(k))


def _struct_renderer(st: StructType, zone: TimeZoneSpec) -> Callable[[Any], str]:
    names = [json_quote(f.name) + ":" for f in st.fields]
    renderers = [_value_renderer(f.data_type, zone) for f in st.fields]
    voids = [json_format(f.data_type) == "void" for f in st.fields]
    pairs = list(zip(names, renderers, voids))

    def render(row: tuple[Any, ...]) -> str:
        parts = [
            name + render_value(value)
            for (name, render_value, void), value in zip(pairs, row)
            if value is not None and not void
        ]
        return "{" + ",".join(parts) + "}"

    return render


@lru_cache(maxsize=256)
def render_row(schema: StructType, zone: str = "UTC") -> JsonRenderer:
    """``render(row) -> str``: the JSON object text Spark writes for a decoded row.

    ``row`` is what :func:`parsers.unsaferow.row_decoder` returns for ``schema``. Slower
    than :func:`row_json_encoder` (which starts from bytes), but handy for rows already
    decoded. ``None`` fields (and ``void`` ones) are left out, like Spark does.
    """
    _check_supported(schema)
    return _struct_renderer(schema, TimeZoneSpec(zone))


def _python_converter(dt: DataType, zone: TimeZoneSpec) -> Callable[[Any], Any]:
    fmt = json_format(dt)
    if fmt in ("num", "bool", "string", "dec"):
        return lambda v: v
    if fmt == "double":
        return lambda v: v if -_INF < v < _INF else json.loads(double_json(v))
    if fmt == "float":
        # Spark's text of a float (``0.1``) parses to a different double than the float32.
        return lambda v: json.loads(float_json(v))
    if isinstance(dt, StructType):
        return _python_struct(dt, zone)
    if isinstance(dt, ArrayType):
        element = _python_converter(dt.element_type, zone)
        return lambda v: [None if x is None else element(x) for x in v]
    if isinstance(dt, MapType):
        key = _tuple_key_string(dt.key_type)
        value = _python_converter(dt.value_type, zone)
        return lambda pairs: {key(k): None if v is None else value(v) for k, v in pairs}
    text = _value_renderer(dt, zone)
    return lambda v: json.loads(text(v))


def _python_struct(st: StructType, zone: TimeZoneSpec) -> Callable[[Any], dict[str, Any]]:
    seen: dict[str, int] = {}
    keys = []
    for f in st.fields:
        n = seen.get(f.name, 0)
        seen[f.name] = n + 1
        keys.append(f.name if n == 0 else f"{f.name}_{n}")
    converters = [_python_converter(f.data_type, zone) for f in st.fields]
    voids = [json_format(f.data_type) == "void" for f in st.fields]
    items = list(zip(keys, converters, voids))

    def convert(row: tuple[Any, ...]) -> dict[str, Any]:
        return {
            key: conv(value)
            for (key, conv, void), value in zip(items, row)
            if value is not None and not void
        }

    return convert


@lru_cache(maxsize=256)
def to_python(schema: StructType, zone: str = "UTC") -> Callable[[tuple[Any, ...]], dict[str, Any]]:
    """``convert(row) -> dict``: a decoded row as the Python object of Spark's JSON for it.

    The result equals ``json.loads`` of Spark's text, with two deliberate differences:
    decimals stay exact ``Decimal`` values (``json.loads`` would make them floats), and a
    field name that repeats (allowed in state schemas) gets a suffix ``_1``, ``_2``… for
    its later occurrences instead of overwriting the first. Null fields are left out,
    timestamps and dates are Spark's strings, NaN and infinities the strings Spark writes.
    """
    _check_supported(schema)
    return _python_struct(schema, TimeZoneSpec(zone))
