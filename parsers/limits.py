"""How far a decoder may expand a file before it is judged hostile (a decompression bomb).

Compression formats let a few bytes claim a lot of output: an LZ4 block of 32 KiB may declare
32 MiB, a deflated zip entry of 1 MiB may inflate to 1 GiB. Spark never writes such files, so a
decoder stops at a *budget* derived from the file's own size, before it allocates the output:

* ``max_ratio``: decompressed bytes per compressed byte (real state files are well under 10x;
  LZ4 cannot exceed ~255x, deflate ~1032x, so only a cap keeps a small file small);
* ``min_bytes``: a floor, so tiny files (a few rows) are never refused by the ratio;
* ``max_file_bytes``: an absolute cap per file, whatever its size.

A file decoded in pieces (an SST's blocks, a stream's frames) is held to one budget through an
:class:`Allowance`, which counts what its pieces claim. A *streamed* file (an event log, decoded
block by block and never held whole: a day of events decodes to gigabytes) is held to the ratio
and the floor over all it decodes, and to ``max_file_bytes`` for each piece held at once (a
block, a line).

The collectors take the values from a config file or the environment (``docs/limits.md``); a
store with legitimately huge files raises them.

Example::

    >>> DecodeLimits().budget(4 << 20) == 64 * (4 << 20)
    True
    >>> DecodeLimits(max_ratio=2, min_bytes=0).budget(100)
    200
    >>> allowance = Allowance(DecodeLimits(max_ratio=2, min_bytes=0), 100)
    >>> allowance.claim("lz4", 150); allowance.left
    50
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stateglass.parsers.errors import LimitExceeded
from stateglass.parsers.units import fmt_bytes

DEFAULT_MAX_RATIO = 64
DEFAULT_MIN_BYTES = 16 << 20  # 16 MiB
DEFAULT_MAX_FILE_BYTES = 2 << 30  # 2 GiB


@dataclass(frozen=True)
class DecodeLimits:
    """The decompression budget of one file; see the module docstring."""

    max_ratio: int = DEFAULT_MAX_RATIO
    min_bytes: int = DEFAULT_MIN_BYTES
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES

    def budget(self, compressed_size: int, streamed: bool = False) -> int:
        """The most bytes a file of ``compressed_size`` bytes may decompress to (``streamed``:
        in all, when it is never held whole, so ``max_file_bytes`` does not apply)."""
        by_ratio = max(self.min_bytes, self.max_ratio * compressed_size)
        if streamed or not self.max_file_bytes:
            return by_ratio
        return min(self.max_file_bytes, by_ratio)

    def check(
        self,
        what: str,
        claimed: int,
        compressed_size: int,
        offset: int = 0,
        streamed: bool = False,
    ) -> None:
        """Raise :class:`LimitExceeded` when ``claimed`` output bytes are over the budget."""
        budget = self.budget(compressed_size, streamed)
        if claimed > budget:
            bound = (
                f"min_bytes {fmt_bytes(self.min_bytes)}"
                if streamed
                else (f"max_file_bytes {fmt_bytes(self.max_file_bytes)}")
            )
            raise LimitExceeded(
                f"{what}: expands to more than {fmt_bytes(budget)} from "
                f"{fmt_bytes(compressed_size)} "
                f"(decompression limit: max_ratio {self.max_ratio}, {bound}; "
                "see docs/limits.md to raise it)",
                offset,
            )

    def check_piece(self, what: str, size: int, offset: int = 0) -> None:
        """Raise :class:`LimitExceeded` when one piece of a streamed file held at once (a
        block, a line) is over ``max_file_bytes``."""
        if self.max_file_bytes and size > self.max_file_bytes:
            raise LimitExceeded(
                f"{what}: {fmt_bytes(size)} held at once (decompression limit: max_file_bytes "
                f"{fmt_bytes(self.max_file_bytes)}; see docs/limits.md to raise it)",
                offset,
            )


@dataclass
class Allowance:
    """What one file decoded piece by piece may still expand to: its budget, less what its
    pieces claimed. A decoder claims a piece's size *before* it decodes the piece.

    ``streamed``: the file is decoded in pieces and never held whole (see the module
    docstring): the budget leaves out ``max_file_bytes``, which bounds each piece instead.
    """

    limits: DecodeLimits
    compressed_size: int
    streamed: bool = False
    claimed: int = field(default=0, init=False)

    def claim(self, what: str, size: int, offset: int = 0) -> None:
        """Count ``size`` more output bytes; raise :class:`LimitExceeded` past the budget."""
        self.claimed += size
        self.limits.check(what, self.claimed, self.compressed_size, offset, self.streamed)
        if self.streamed:
            self.limits.check_piece(what, size, offset)

    @property
    def left(self) -> int:
        """Output bytes not yet claimed."""
        return max(0, self.limits.budget(self.compressed_size, self.streamed) - self.claimed)

    @property
    def piece(self) -> int:
        """The most one piece may produce: what is left, and for a streamed file no more
        than ``max_file_bytes``."""
        cap = self.limits.max_file_bytes
        return min(self.left, cap) if self.streamed and cap else self.left


DEFAULT_LIMITS = DecodeLimits()

__all__ = ["DEFAULT_LIMITS", "Allowance", "DecodeLimits"]
