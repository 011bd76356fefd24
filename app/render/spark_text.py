"""Spark's text for single values: dates, timestamps, intervals, numbers, map keys.

The pieces :mod:`stateglass.app.render.bytes_to_json` and
:mod:`stateglass.app.render.rows_to_json` assemble into rows. Each function returns JSON text
(quoted where Spark quotes) or, for map keys, the Java ``toString`` Spark prints. The rules
were observed on Spark 4.3.0 / Java 17; see ``docs/json-rendering.md``.

Example::

    >>> date_json(19724), timestamp_json(TimeZoneSpec("+05:30"))(0)
    ('"2024-01-02"', '"1970-01-01T05:30:00.000+05:30"')
"""

from __future__ import annotations

import binascii
import datetime as _dt
import re
import struct
import zlib
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from stateglass.app.render.java_text import (
    java_double_to_string,
    java_float_to_string,
    java_int_hex,
    java_long_hex,
    json_quote,
)
from stateglass.parsers.errors import UnsupportedFormat
from stateglass.parsers.java_bytes import murmur3_hash_bytes
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
from stateglass.parsers.unsaferow import CalendarInterval, slot_kind

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


# java.time.ZoneId.SHORT_IDS, which Spark accepts for spark.sql.session.timeZone.
_SHORT_IDS = {
    "ACT": "Australia/Darwin",
    "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo",
    "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo",
    "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare",
    "CNT": "America/St_Johns",
    "CST": "America/Chicago",
    "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa",
    "ECT": "Europe/Paris",
    "IET": "America/Indiana/Indianapolis",
    "IST": "Asia/Kolkata",
    "JST": "Asia/Tokyo",
    "MIT": "Pacific/Apia",
    "NET": "Asia/Yerevan",
    "NST": "Pacific/Auckland",
    "PLT": "Asia/Karachi",
    "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico",
    "PST": "America/Los_Angeles",
    "SST": "Pacific/Guadalcanal",
    "VST": "Asia/Ho_Chi_Minh",
    "EST": "-05:00",
    "MST": "-07:00",
    "HST": "-10:00",
}
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
        text = _SHORT_IDS.get(text, text)
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


# Fields Spark keeps as epoch milliseconds in a long, by its contract (not guessed from a
# value): a registered timer's expiration (readRegisteredTimers) and a TTL'd value's
# expiration. Their JSON stays the long Spark's reader gives; text shows them as timestamps.
EPOCH_MS_FIELDS = frozenset({"expiration_timestamp_ms", "ttlExpirationMs"})


def epoch_ms_text(zone: TimeZoneSpec) -> Callable[[int], str]:
    """A function: epoch milliseconds → a timestamp as Spark's ``show()`` prints one in the
    session time zone ``zone`` (``2024-01-01 00:54:46``, a fraction only when not whole:
    ``…:46.5``)."""

    def text(ms: int) -> str:
        sec, milli = divmod(int(ms), 1000)
        days, rest = divmod(sec + zone.offset_at(sec), 86400)
        fraction = f".{milli:03d}".rstrip("0") if milli else ""
        return f"{_plain_date(days)} {_clock(rest)}{fraction}"

    return text


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


def key_text(fmt: str) -> Callable[[Any], str]:
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


def check_supported(dt: DataType) -> None:
    """Refuse, when building a renderer, types whose JSON we do not produce yet."""
    fmt = json_format(dt)
    if fmt == "variant":
        raise UnsupportedFormat("JSON rendering of variant values is not supported yet")
    if isinstance(dt, StructType):
        for f in dt.fields:
            check_supported(f.data_type)
    elif isinstance(dt, ArrayType):
        check_supported(dt.element_type)
    elif isinstance(dt, MapType):
        key_text(json_format(dt.key_type))
        check_supported(dt.key_type)
        check_supported(dt.value_type)
