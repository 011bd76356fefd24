"""Process-wide allocator settings for the commands that read whole stores.

Reading a store allocates and frees buffers of megabytes for every partition (decompressed
files, rendered text). By default glibc returns them to the kernel and maps fresh pages for
the next partition, a page fault every 4 KiB: on a 10M-key store that was more system time
than the rendering. Kept for reuse, they cost nothing the next time; the process's peak
memory stays what one partition needs.
"""

from __future__ import annotations


def keep_freed_memory() -> bool:
    """Ask the allocator to keep freed blocks for reuse; False where it cannot (not glibc, or
    without the compiled extension)."""
    try:
        from stateglass.parsers import _speedups
    except ImportError:
        return False
    return _speedups.keep_freed_memory()
