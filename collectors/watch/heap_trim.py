"""Handing memory a process freed back to the operating system (glibc's ``malloc_trim``).

glibc keeps the pages of freed blocks for the process's next allocations, and gives back
only a free stretch at the very top of the main heap. A watcher's full listing reads what the
database knows of a checkpoint and builds its diff (tens of thousands of small objects), and
every connection DuckDB opens and closes leaves glibc's arenas (one per thread) a little more
fragmented (400 open-write-close cycles on a soak's database: 6 MiB in use throughout, free
and kept 6 -> 10 MiB). Those pages stay resident between the blocks still live, so the RSS
of a watcher running for months would show its busiest scans, not what it holds.
``malloc_trim(0)`` walks every arena and releases each free page (``madvise``) in about a
millisecond, so a watcher calls it after each full listing (a few a minute at most).

Where the C library is not glibc (musl, macOS, Windows) there is no such call and
:func:`give_back` does nothing.

Example::

    give_back()  # True: glibc released some memory
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

# glibc's soname on every Linux it runs on.
GLIBC = "libc.so.6"


@functools.lru_cache(maxsize=4)
def _trimmer(library: str) -> Callable[[int], int] | None:
    """``malloc_trim`` of ``library``, or None when it is not there (not glibc)."""
    try:
        trim = ctypes.CDLL(library).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def give_back(library: str = GLIBC) -> bool:
    """Release the free pages of every heap arena; whether any were released. Never raises:
    without glibc (``library`` absent, or lacking the call) it is False and nothing happens."""
    trim = _trimmer(library)
    # 0: keep no slack at the top of the heap; the next scan grows it again if it must.
    return trim is not None and trim(0) == 1
