"""How far a decoder may expand a file before it is judged hostile (a decompression bomb).

Compression formats let a few bytes claim a lot of output: an LZ4 block of 32 KiB may declare
32 MiB, a deflated zip entry of 1 MiB may inflate to 1 GiB. Spark never writes such files, so a
decoder stops at a *budget* derived from the file's own size, before it allocates the output:

* ``max_ratio``: decompressed bytes per compressed byte (real state files are well under 10x;
  LZ4 cannot exceed ~255x, deflate ~1032x, so only a cap keeps a small file small);
* ``min_bytes``: a floor, so tiny files (a few rows) are never refused by the ratio;
* ``max_file_bytes``: an absolute cap per file, whatever its size.

The collectors take the values from a config file or the environment (``docs/limits.md``); a
store with legitimately huge files raises them.

Example::

    >>> DecodeLimits().budget(4 << 20) == 64 * (4 << 20)
    True
    >>> DecodeLimits(max_ratio=2, min_bytes=0).budget(100)
    200
"""

from __future__ import annotations

from dataclasses import dataclass

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

    def budget(self, compressed_size: int) -> int:
        """The most bytes a file of ``compressed_size`` bytes may decompress to."""
        by_ratio = max(self.min_bytes, self.max_ratio * compressed_size)
        return min(self.max_file_bytes, by_ratio) if self.max_file_bytes else by_ratio

    def check(self, what: str, claimed: int, compressed_size: int, offset: int = 0) -> None:
        """Raise :class:`LimitExceeded` when ``claimed`` output bytes are over the budget."""
        budget = self.budget(compressed_size)
        if claimed > budget:
            raise LimitExceeded(
                f"{what}: expands to more than {fmt_bytes(budget)} from "
                f"{fmt_bytes(compressed_size)} "
                f"(decompression limit: max_ratio {self.max_ratio}, max_file_bytes "
                f"{fmt_bytes(self.max_file_bytes)}; see docs/limits.md to raise it)",
                offset,
            )


DEFAULT_LIMITS = DecodeLimits()

__all__ = ["DEFAULT_LIMITS", "DecodeLimits"]
