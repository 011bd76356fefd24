"""Java's byte conventions that decoders must reproduce: its UTF-8 decoding and Murmur3.

* ``new String(bytes, UTF_8)`` replaces malformed UTF-8 differently from Python's
  ``errors="replace"`` (an encoded surrogate ``ED A0 80`` is one U+FFFD in Java, three in
  Python). :func:`decode_utf8` is a port of JDK 17's ``String.decodeUTF8_UTF16``.
* Spark's ``Murmur3_x86_32`` places keys in partitions (:mod:`stateglass.parsers.partitioning`)
  and checks rows; its variant mixes trailing bytes as whole ints.

Example::

    >>> decode_utf8(b"\\xed\\xa0\\x80"), murmur3_hash_bytes(b"", 42)
    ('\\ufffd', 142593372)
"""

from __future__ import annotations

import struct

__all__ = ["decode_utf8", "murmur3_fmix", "murmur3_hash_bytes", "murmur3_mix"]

# ---------------------------------------------------------------------------------------------
# new String(bytes, UTF_8) — JDK 17 String.decodeUTF8_UTF16 with replacement
# ---------------------------------------------------------------------------------------------

_REPL = "\ufffd"


def _cont(b: int) -> bool:
    return (b & 0xC0) == 0x80


def _bad4_lead(b1: int, b2: int) -> bool:
    """``isMalformed4_2`` / first test of ``malformed4``: the 2nd byte cannot follow ``b1``."""
    return (
        b1 > 0xF4
        or (b1 == 0xF0 and (b2 < 0x90 or b2 > 0xBF))
        or (b1 == 0xF4 and (b2 & 0xF0) != 0x80)
        or not _cont(b2)
    )


def _decode_utf8_java(src: bytes) -> str:
    out: list[str] = []
    sp, sl = 0, len(src)
    while sp < sl:
        b1 = src[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif (b1 >> 5) == 0b110 and (b1 & 0x1E):
            if sp < sl:
                b2 = src[sp]
                if _cont(b2):
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                    sp += 1
                else:
                    out.append(_REPL)
                continue
            out.append(_REPL)
            break
        elif (b1 >> 4) == 0b1110:
            if sp + 1 < sl:
                b2, b3 = src[sp], src[sp + 1]
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) or not _cont(b3):
                    out.append(_REPL)
                    # malformed3: skip the lead byte, and the 2nd byte too if it was valid
                    bad2 = (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2)
                    sp += 0 if bad2 else 1
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(_REPL if 0xD800 <= c <= 0xDFFF else chr(c))
                    sp += 2
                continue
            if sp < sl and ((b1 == 0xE0 and (src[sp] & 0xE0) == 0x80) or not _cont(src[sp])):
                out.append(_REPL)
                continue
            out.append(_REPL)
            break
        elif (b1 >> 3) == 0b11110:
            if sp + 2 < sl:
                b2, b3, b4 = src[sp], src[sp + 1], src[sp + 2]
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_cont(b2) and _cont(b3) and _cont(b4)) or not 0x10000 <= uc <= 0x10FFFF:
                    out.append(_REPL)
                    # malformed4: how many bytes form the bad sequence (1, 2 or 3)
                    if _bad4_lead(b1, b2):
                        pass
                    elif not _cont(b3):
                        sp += 1
                    else:
                        sp += 2
                else:
                    out.append(chr(uc))
                    sp += 3
                continue
            if b1 > 0xF4 or (sp < sl and _bad4_lead(b1, src[sp])):
                out.append(_REPL)
                continue
            sp += 1
            out.append(_REPL)
            if sp < sl and not _cont(src[sp]):
                continue
            break
        else:
            out.append(_REPL)
    return "".join(out)


def decode_utf8(raw: bytes) -> str:
    """UTF-8 bytes to str exactly as Spark's ``UTF8String.toString()`` does on Java 17."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _decode_utf8_java(bytes(raw))


# ---------------------------------------------------------------------------------------------
# Murmur3_x86_32, Spark's variant
# ---------------------------------------------------------------------------------------------


def murmur3_fmix(h: int, length: int) -> int:
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def murmur3_mix(h1: int, k1: int) -> int:
    k1 = (k1 * 0xCC9E2D51) & 0xFFFFFFFF
    k1 = ((k1 << 15) | (k1 >> 17)) & 0xFFFFFFFF
    k1 = (k1 * 0x1B873593) & 0xFFFFFFFF
    h1 ^= k1
    h1 = ((h1 << 13) | (h1 >> 19)) & 0xFFFFFFFF
    return (h1 * 5 + 0xE6546B64) & 0xFFFFFFFF


def _murmur3_hash_bytes(data: bytes, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashUnsafeBytes`` (signed int), e.g. ``UnsafeArrayData.hashCode``.

    Spark's variant mixes each trailing byte (after the last whole 4-byte word) as a whole
    sign-extended int, unlike reference MurmurHash3.
    """
    h1 = seed & 0xFFFFFFFF
    aligned = len(data) - len(data) % 4
    for (word,) in struct.iter_unpack("<I", data[:aligned]):
        h1 = murmur3_mix(h1, word)
    for byte in data[aligned:]:
        h1 = murmur3_mix(h1, (byte - 256 if byte > 127 else byte) & 0xFFFFFFFF)
    h = murmur3_fmix(h1, len(data))
    return h - (1 << 32) if h >> 31 else h


# A rewrite hashes the partition key of every stored row: compiled when built.
try:
    from stateglass.parsers._speedups import murmur3_bytes as murmur3_hash_bytes
except ImportError:  # not built, or STATEGLASS_PURE=1: the Python above
    murmur3_hash_bytes = _murmur3_hash_bytes
