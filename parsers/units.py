"""Byte counts, durations and instants as people read them: one spelling for every screen.

The CLI, the health findings, the dashboard's pages, the reports and the decompression
limits' messages all print sizes and times through here, so ``1.5 KiB`` and ``12m 5s`` read
the same everywhere, and a value nobody knows prints as :data:`UNKNOWN` on all of them.
It lives with the parsers because their limits name sizes too: every layer can import it.

Example::

    fmt_bytes(1536)            # '1.5 KiB'
    fmt_duration(725)          # '12m 5s'
    fmt_age(-30)               # '30s ahead of this clock'
    fmt_bytes(None)            # 'n/a'
    utc_ms(1704070200000)      # '2024-01-01 00:50:00.000'
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

UNKNOWN = "n/a"
"""What a size, duration or age that is not known prints as."""

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB")


def number(value: object) -> float | None:
    """``value`` as a float; None when it is missing (None, NaN, pandas' NA)."""
    if value is None:
        return None
    try:
        as_float = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(as_float) else as_float


def fmt_bytes(value: object) -> str:
    """``512`` -> ``512 B``, ``1536`` -> ``1.5 KiB``, up to GiB (``2,048.0 GiB``); a missing
    value (None, NaN, pandas' NA) -> :data:`UNKNOWN`."""
    size = number(value)
    if size is None:
        return UNKNOWN
    for unit in _BYTE_UNITS[:-1]:
        if abs(size) < 1024:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} {_BYTE_UNITS[-1]}"


def fmt_duration(seconds: object) -> str:
    """``0.045`` -> ``45ms``, ``4.5`` -> ``4.5s``, ``45`` -> ``45s``, ``725`` -> ``12m 5s``,
    ``11520`` -> ``3.2h``, ``354240`` -> ``4.1d``; the sign kept at every scale; a missing
    value -> :data:`UNKNOWN`."""
    value = number(seconds)
    if value is None:
        return UNKNOWN
    s = abs(value)
    # A clock behind the checkpoint's makes ages negative: keep the sign at every scale.
    sign = "-" if value < 0 else ""
    if s * 1000 < 999.5:  # what rounds to a whole second is one
        return f"{sign}{s * 1000:.0f}ms"
    if s < 60:
        return f"{sign}{s:.1f}s" if s < 10 else f"{sign}{s:.0f}s"
    if s < 3600:
        return f"{sign}{int(s // 60)}m {int(s % 60)}s"
    if s < 86400:
        return f"{sign}{s / 3600:.1f}h"
    return f"{sign}{s / 86400:.1f}d"


def fmt_ms(milliseconds: object) -> str:
    """:func:`fmt_duration` of a time in milliseconds (Spark's unit in its logs and events)."""
    value = number(milliseconds)
    return fmt_duration(None if value is None else value / 1000)


def fmt_age(seconds: object) -> str:
    """How long ago something happened, ``seconds`` before now: ``12m 5s ago``; a moment
    after now (the other clock is ahead of this one) says so; a missing value ->
    :data:`UNKNOWN`."""
    value = number(seconds)
    if value is None:
        return UNKNOWN
    if value < 0:
        return f"{fmt_duration(-value)} ahead of this clock"
    return f"{fmt_duration(value)} ago"


def utc_ms(ms: int) -> str:
    """Milliseconds since the epoch as ``2024-01-01 00:05:00.000`` (UTC); outside the years
    Python's datetime holds (Spark's timestamps reach further), the number itself."""
    try:
        return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (ValueError, OverflowError, OSError):
        return f"{ms} ms since the epoch"


__all__ = ["UNKNOWN", "fmt_age", "fmt_bytes", "fmt_duration", "fmt_ms", "number", "utc_ms"]
