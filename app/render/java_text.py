"""Java and Jackson text conventions that Spark's JSON output inherits, reproduced in Python.

Spark renders numbers and strings with the JVM's own routines, and some of them differ from
Python's:

* ``Double.toString``/``Float.toString`` before JDK 19 (Spark 4.x on Java 17) do not always
  print the shortest digits. A float printed by Java 17 can therefore parse to a different
  double than Python's shortest text: ``4.95433023E11`` versus ``4.9543302E11``. The port
  of ``FloatingDecimal.BinaryToASCIIBuffer.dtoa`` below is exact (checked against Spark
  4.3.0 on Java 17 for 400,000 random floats and doubles).
* Jackson escapes control characters as ``\\u001F`` (upper-case hex); ``json.dumps`` as
  ``\\u001f``.

Example::

    >>> java_float_to_string(0.10000000149011612), java_double_to_string(1e21)
    ('0.1', '1.0E21')
    >>> bigdecimal_to_string(0, 10), bigdecimal_to_string(15, 1)
    ('0E-10', '1.5')
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from functools import lru_cache
from json.encoder import encode_basestring
from typing import NamedTuple

__all__ = [
    "bigdecimal_to_string",
    "fix_unicode_escapes",
    "java_double_to_string",
    "java_float_to_string",
    "java_int_hex",
    "java_long_hex",
    "json_quote",
]

# ---------------------------------------------------------------------------------------------
# Double.toString / Float.toString (JDK 8-18 FloatingDecimal)
# ---------------------------------------------------------------------------------------------

_D = struct.Struct("<d")
_Q = struct.Struct("<Q")
_F = struct.Struct("<f")
_I = struct.Struct("<I")

# Approximately ceil(log2(5**i)), as in FloatingDecimal.N_5_BITS.
_N_5_BITS = (0, 3, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28, 31, 33, 35, 38, 40, 42, 45, 47, 49,
             52, 54, 56, 59, 61)  # fmt: skip
# insignificantDigitsForPow2 table: number of decimal digits below 2**i that cannot matter.
_INSIGNIFICANT = (0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7,
                  7, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14,
                  14, 14, 15, 15, 15, 15, 16, 16, 16, 17, 17, 17, 18, 18, 18, 19)  # fmt: skip
_LONG_5_POW_LEN = 27
_EXP_SHIFT = 52
_FRACT_HOB = 1 << 52
_MAX_SMALL_BIN_EXP = 62
_MIN_SMALL_BIN_EXP = -21


def _wrap32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >> 31 else x


def _wrap64(x: int) -> int:
    x &= 0xFFFFFFFFFFFFFFFF
    return x - (1 << 64) if x >> 63 else x


def _estimate_dec_exp(fract_bits: int, bin_exp: int) -> int:
    d2 = _D.unpack(_Q.pack((1023 << 52) | (fract_bits & (_FRACT_HOB - 1))))[0]
    d = (d2 - 1.5) * 0.289529654 + 0.176091259 + bin_exp * 0.301029995663981
    return math.floor(d)


def _roundup(digits: list[int], dec_exponent: int) -> tuple[list[int], int]:
    i = len(digits) - 1
    q = digits[i]
    if q == 9:
        while q == 9 and i > 0:
            digits[i] = 0
            i -= 1
            q = digits[i]
        if q == 9:
            digits[0] = 1
            return digits, dec_exponent + 1
    digits[i] = q + 1
    return digits, dec_exponent


class _Scales(NamedTuple):
    """FloatingDecimal's ``b = fract * 5**b5 * 2**b2`` (the value), ``S = 5**s5 * 2**s2`` (the
    scale) and ``M = 5**m5 * 2**m2`` (half an ulp), with their common power of two removed."""

    b5: int
    b2: int
    s5: int
    s2: int
    m5: int
    m2: int


# What a digit loop ends with: digits, decimal exponent, whether the digits are within half an
# ulp below (low) or above (high), and 2b - 10S to break the tie when both are.
_Digits = tuple[list[int], int, bool, bool, int]


def _dtoa(bin_exp: int, fract_bits: int, n_sig_bits: int) -> tuple[str, int]:
    """Digits and decimal exponent (value = 0.DIGITS * 10**exp) as JDK 17 computes them.

    Java's int/long arithmetic wraps; the port wraps too, because the JDK relies on it
    (``m`` may overflow and then stops the digit loop).
    """
    tail_zeros = (fract_bits & -fract_bits).bit_length() - 1
    n_fract_bits = _EXP_SHIFT + 1 - tail_zeros
    n_tiny_bits = max(0, n_fract_bits - bin_exp - 1)
    if (
        _MIN_SMALL_BIN_EXP <= bin_exp <= _MAX_SMALL_BIN_EXP
        and n_tiny_bits < _LONG_5_POW_LEN
        and n_fract_bits + _N_5_BITS[n_tiny_bits] < 64
        and n_tiny_bits == 0
    ):
        return _long_digits(bin_exp, fract_bits, n_sig_bits)
    dec_exp = _estimate_dec_exp(fract_bits, bin_exp)
    scales = _scales(dec_exp, bin_exp, n_sig_bits, n_fract_bits, n_tiny_bits)
    fract_bits >>= tail_zeros
    b5, b2, s5, s2 = scales.b5, scales.b2, scales.s5, scales.s2
    b_bits = n_fract_bits + b2 + (_N_5_BITS[b5] if b5 < len(_N_5_BITS) else b5 * 3)
    ten_s_bits = s2 + 1 + (_N_5_BITS[s5 + 1] if s5 + 1 < len(_N_5_BITS) else (s5 + 1) * 3)
    if b_bits < 64 and ten_s_bits < 64:
        wrap = _wrap32 if (b_bits < 32 and ten_s_bits < 32) else _wrap64
        digits, dec_exp, low, high, low_diff = _wrapped_digits(wrap, fract_bits, dec_exp, scales)
    else:
        digits, dec_exp, low, high, low_diff = _exact_digits(fract_bits, dec_exp, scales)
    dec_exponent = dec_exp + 1
    if high and (not low or low_diff > 0 or (low_diff == 0 and digits[-1] & 1)):
        digits, dec_exponent = _roundup(digits, dec_exponent)
    return "".join(map(str, digits)), dec_exponent


def _long_digits(bin_exp: int, fract_bits: int, n_sig_bits: int) -> tuple[str, int]:
    """An integer that fits a long: Java prints its digits, rounding away the ones below the
    precision of the type (this is where Java 17 prints too many digits)."""
    insignificant = 0
    if bin_exp > n_sig_bits:
        p2 = bin_exp - n_sig_bits - 1
        insignificant = _INSIGNIFICANT[p2] if 1 < p2 < len(_INSIGNIFICANT) else 0
    if bin_exp >= _EXP_SHIFT:
        lvalue = fract_bits << (bin_exp - _EXP_SHIFT)
    else:
        lvalue = fract_bits >> (_EXP_SHIFT - bin_exp)
    dec_exp = 0
    if insignificant:
        pow10 = 10**insignificant
        lvalue, residue = divmod(lvalue, pow10)
        dec_exp += insignificant
        if residue >= (pow10 >> 1):
            lvalue += 1
    text = str(lvalue)
    stripped = text.rstrip("0")
    return stripped, dec_exp + len(text)


def _scales(
    dec_exp: int, bin_exp: int, n_sig_bits: int, n_fract_bits: int, n_tiny_bits: int
) -> _Scales:
    b5 = max(0, -dec_exp)
    b2 = b5 + n_tiny_bits + bin_exp
    s5 = max(0, dec_exp)
    s2 = s5 + n_tiny_bits
    m5 = b5
    m2 = b2 - n_sig_bits
    b2 -= n_fract_bits - 1
    common = min(b2, s2)
    b2 -= common
    s2 -= common
    m2 -= common
    if n_fract_bits == 1:
        m2 -= 1  # the JDK's "HACK" for exact powers of two (narrower interval, more digits)
    if m2 < 0:
        b2 -= m2
        s2 -= m2
        m2 = 0
    return _Scales(b5, b2, s5, s2, m5, m2)


def _wrapped_digits(
    wrap: Callable[[int], int], fract_bits: int, dec_exp: int, sc: _Scales
) -> _Digits:
    """The digit loop in Java ints or longs (``wrap``), overflow included."""
    digits: list[int] = []
    b = wrap((fract_bits * 5**sc.b5) << sc.b2)
    s = wrap(5**sc.s5 << sc.s2)
    m = wrap(5**sc.m5 << sc.m2)
    tens = wrap(s * 10)
    q, b = divmod(b, s)
    b = wrap(10 * b)
    m = wrap(m * 10)
    low = b < m
    high = wrap(b + m) > tens
    if q == 0 and not high:
        dec_exp -= 1
    else:
        digits.append(q)
    if dec_exp < -3 or dec_exp >= 8:
        high = low = False  # E-form always has a digit after the point
    while not low and not high:
        q, b = divmod(b, s)
        b = wrap(10 * b)
        m = wrap(m * 10)
        if m > 0:
            low = b < m
            high = wrap(b + m) > tens
        else:
            low = high = True
        digits.append(q)
    return digits, dec_exp, low, high, wrap((b << 1) - tens)


def _exact_digits(fract_bits: int, dec_exp: int, sc: _Scales) -> _Digits:
    """The digit loop in FDBigIntegers (here Python ints), for values too wide for a long."""
    digits: list[int] = []
    bv = fract_bits * 5**sc.b5 << sc.b2
    sv = 5**sc.s5 << sc.s2
    mv = 5 ** (sc.m5 + 1) << (sc.m2 + 1)
    ten_sv = 5 ** (sc.s5 + 1) << (sc.s2 + 1)
    q, bv = divmod(bv, sv)
    bv *= 10
    low = bv < mv
    high = bv + mv >= ten_sv
    if q == 0 and not high:
        dec_exp -= 1
    else:
        digits.append(q)
    if dec_exp < -3 or dec_exp >= 8:
        high = low = False
    while not low and not high:
        q, bv = divmod(bv, sv)
        bv *= 10
        mv *= 10
        low = bv < mv
        high = bv + mv >= ten_sv
        digits.append(q)
    return digits, dec_exp, low, high, (bv << 1) - ten_sv if (high and low) else 0


def _java_layout(negative: bool, digits: str, dec_exponent: int) -> str:
    """``BinaryToASCIIBuffer.getChars``: plain for 1e-3 <= |v| < 1e7, else ``d.dddE±n``."""
    sign = "-" if negative else ""
    n = len(digits)
    if 0 < dec_exponent < 8:
        if n <= dec_exponent:
            return f"{sign}{digits}{'0' * (dec_exponent - n)}.0"
        return f"{sign}{digits[:dec_exponent]}.{digits[dec_exponent:]}"
    if -3 < dec_exponent <= 0:
        return f"{sign}0.{'0' * -dec_exponent}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{dec_exponent - 1}"


def _double_exact(x: float) -> str:
    bits = _Q.unpack(_D.pack(x))[0]
    negative = bool(bits >> 63)
    fract = bits & (_FRACT_HOB - 1)
    bin_exp = (bits >> 52) & 0x7FF
    if bin_exp == 0x7FF:
        return "NaN" if fract else ("-Infinity" if negative else "Infinity")
    if bin_exp == 0:
        if not fract:
            return "-0.0" if negative else "0.0"
        leading = 64 - fract.bit_length()
        shift = leading - 11
        fract <<= shift
        bin_exp = 1 - shift
        n_sig = 64 - leading
    else:
        fract |= _FRACT_HOB
        n_sig = 53
    digits, exp10 = _dtoa(bin_exp - 1023, fract, n_sig)
    return _java_layout(negative, digits, exp10)


_REPR = re.compile(r"(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?")
_TWO_53 = float(1 << 53)
_MIN_NORMAL = 2.2250738585072014e-308


def java_double_to_string(x: float) -> str:
    """``Double.toString(x)`` as printed by Java 17 (Spark's JSON text of a double).

    Python's shortest ``repr`` gives the same digits except for exact powers of two,
    integers of 2**53 and above, and subnormals (see ``tests/parsers/test_sparkjson.py``);
    those take the exact port.
    """
    if 1e-3 <= x < 1e7 or -1e7 < x <= -1e-3:
        if math.frexp(x)[0] in (0.5, -0.5):
            return _double_exact(x)
        return repr(x)
    a = abs(x)
    if a >= _TWO_53 or a < _MIN_NORMAL or math.frexp(x)[0] in (0.5, -0.5) or a != a:
        return _double_exact(x)
    # Re-layout Python's shortest digits the Java way (d.dddE±n).
    m = _REPR.fullmatch(repr(x))
    assert m is not None
    sign, ip, fp, ex = m.groups()
    fp = fp or ""
    all_digits = ip + fp
    stripped = all_digits.lstrip("0")
    lead = len(all_digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    exp10 = len(ip) - lead + int(ex or 0)
    return _java_layout(bool(sign), digits, exp10)


def java_float_to_string(x: float) -> str:
    """``Float.toString((float) x)`` as printed by Java 17; ``x`` must be a float32 value."""
    if x == 0.0:  # 0.0 == -0.0, so zeros must not reach the cache
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    return _float_text(x)


@lru_cache(maxsize=65536)
def _float_text(x: float) -> str:
    bits = _I.unpack(_F.pack(x))[0]
    negative = bool(bits >> 31)
    fract = bits & 0x7FFFFF
    bin_exp = (bits >> 23) & 0xFF
    if bin_exp == 0xFF:
        return "NaN" if fract else ("-Infinity" if negative else "Infinity")
    if bin_exp == 0:
        if not fract:
            return "-0.0" if negative else "0.0"
        leading = 32 - fract.bit_length()
        shift = leading - 8
        fract <<= shift
        bin_exp = 1 - shift
        n_sig = 32 - leading
    else:
        fract |= 1 << 23
        n_sig = 24
    digits, exp10 = _dtoa(bin_exp - 127, fract << 29, n_sig)
    return _java_layout(negative, digits, exp10)


# ---------------------------------------------------------------------------------------------
# java.math.BigDecimal.toString
# ---------------------------------------------------------------------------------------------


def bigdecimal_to_string(unscaled: int, scale: int) -> str:
    """``BigDecimal.toString()``: scientific notation when scale < 0 or exponent < -6.

    Python's ``str(Decimal)`` follows the same rule; this works from the integer directly,
    which is what the decoders hold for compact decimals.
    """
    if scale == 0:
        return str(unscaled)
    negative = unscaled < 0
    digits = str(-unscaled if negative else unscaled)
    n = len(digits)
    adjusted = n - 1 - scale
    if scale > 0 and adjusted >= -6:
        text = f"{digits[:-scale]}.{digits[-scale:]}" if n > scale else f"0.{digits.zfill(scale)}"
    else:
        mantissa = f"{digits[0]}.{digits[1:]}" if n > 1 else digits
        text = f"{mantissa}E{'+' if adjusted > 0 else ''}{adjusted}" if adjusted else mantissa
    return f"-{text}" if negative else text


# ---------------------------------------------------------------------------------------------
# Jackson string quoting
# ---------------------------------------------------------------------------------------------

# An escaped backslash is matched (and kept) first, so that the text ``\u001f`` of a string,
# quoted as ``\\u001f``, is not mistaken for an escape.
_LOWER_U = re.compile(r"\\\\|\\u00[01][0-9a-f]")


def _upper_u(m: re.Match[str]) -> str:
    text = m.group(0)
    return text if len(text) == 2 else "\\u00" + text[4:].upper()


def fix_unicode_escapes(quoted: str) -> str:
    """Upper-case the hex digits of the ``\\u00xx`` escapes ``json`` writes (Jackson's case)."""
    return _LOWER_U.sub(_upper_u, quoted)


def json_quote(s: str) -> str:
    """A JSON string literal written like Jackson's default ``writeString``.

    Escapes ``"``, ``\\``, ``\\b \\t \\n \\f \\r`` and other controls below U+0020 as
    ``\\u00XX`` with upper-case hex; everything else (DEL, U+2028, non-ASCII, ``/``) is
    written as is. ``json.encoder.encode_basestring`` (C) does the same but with lower-case
    hex, which we fix up in the rare strings that need it.
    """
    out = encode_basestring(s)
    return fix_unicode_escapes(out) if "\\u00" in out else out


# ---------------------------------------------------------------------------------------------
# Object.toString() of Spark values used as map keys
# ---------------------------------------------------------------------------------------------


def java_long_hex(x: int) -> str:
    """``Long.toHexString``: two's complement for negatives, no padding."""
    return format(x & 0xFFFFFFFFFFFFFFFF, "x")


def java_int_hex(x: int) -> str:
    """``Integer.toHexString``: two's complement for negatives, no padding."""
    return format(x & 0xFFFFFFFF, "x")
