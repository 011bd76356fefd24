"""Errors raised by the pure decoders.

Hierarchy::

    ParseError                  anything a decoder refuses
    ├── CorruptData             bytes that do not follow the format (bad magic, bad length, …)
    │   ├── Truncated           the stream ends before the format says it should
    │   ├── ChecksumMismatch    a stored checksum disagrees with the bytes
    │   └── LimitExceeded       the file would expand past its decompression budget (a bomb)
    └── UnsupportedFormat       a well-formed file in a version or codec we do not read

Decoders see bytes, not paths, so they raise without a path; the I/O layer attaches
one with :meth:`ParseError.at` before the message reaches a user.
"""

from __future__ import annotations


class ParseError(Exception):
    """Base of every decoder error; ``str()`` is a one-line message for a user."""

    def __init__(self, why: str, offset: int | None = None, path: str | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.offset = offset
        self.path = path

    def at(self, path: str) -> ParseError:
        """Name the file the bytes came from (first caller wins) and return self for ``raise``."""
        if self.path is None:
            self.path = path
        return self

    def __reduce__(self) -> tuple[type[ParseError], tuple[str, int | None, str | None]]:
        return (type(self), (self.why, self.offset, self.path))

    def __str__(self) -> str:
        where = f" (at byte {self.offset})" if self.offset is not None else ""
        prefix = f"{self.path}: " if self.path else ""
        return f"{prefix}{self.why}{where}"


class CorruptData(ParseError):
    """The bytes do not follow the format."""


class Truncated(CorruptData):
    """The stream ended before the format says it should (often a half-written file)."""


class ChecksumMismatch(CorruptData):
    """A checksum stored in the file disagrees with its content."""


class LimitExceeded(CorruptData):
    """Decoding would exceed the file's decompression budget (:mod:`stateglass.parsers.limits`)."""


class UnsupportedFormat(ParseError):
    """A format version, codec or type that this release of StateGlass does not decode."""
