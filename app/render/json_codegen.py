"""What the generated JSON code of :mod:`~stateglass.app.render.bytes_to_json` and
:mod:`~stateglass.app.render.rows_to_json` runs with: the namespace of helpers every
generated function sees, and the escaping of text into its f-strings."""

from __future__ import annotations

import struct
from json.encoder import encode_basestring
from typing import Any

from stateglass.app.render.java_text import (
    bigdecimal_to_string,
    fix_unicode_escapes,
    json_quote,
)
from stateglass.app.render.spark_text import (
    TimeZoneSpec,
    binary_json,
    calendar_interval_json,
    date_json,
    day_time_interval_json,
    double_json,
    float_json,
    timestamp_json,
    timestamp_ntz_json,
    year_month_interval_json,
)
from stateglass.parsers.errors import CorruptData
from stateglass.parsers.unsaferow import (
    RUNTIME,
    wrap_foreign_errors,
)


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


def runtime(zone: TimeZoneSpec) -> dict[str, Any]:
    """The names generated JSON code may use, with timestamps in ``zone``."""
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
