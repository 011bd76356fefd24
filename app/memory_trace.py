"""Opt-in memory reports of a long-running command, for telling a leak from a plateau in a soak.

With ``STATEGLASS_MEMTRACE=DIR`` in its environment, a ``watch``, ``metrics`` or dashboard
process appends one line every ``STATEGLASS_MEMTRACE_EVERY`` seconds (default 60) to
``DIR/<name>-<pid>.txt``: its RSS, its highest RSS since the line before (``rss_peak``: the
transient peaks of work in flight), anonymous and file-backed (the libraries' code pages);
what glibc's allocator has handed out and holds free (``mallinfo2``, every arena), its
arenas and what they hold in all; the anonymous RSS that is none of glibc's
(``rss_anon_other``: DuckDB's own statically linked jemalloc, which returns its memory when
the connection closes, and Python's arenas); Python's live blocks; Arrow's pool; and the size
of every structure that :func:`gauge` registered (caches, what a watcher remembers). RSS
growing while the allocator's in-use bytes stay flat is memory freed but kept, not a leak.
``STATEGLASS_MEMTRACE_TRACEMALLOC=1`` adds :mod:`tracemalloc`'s allocation sites that grew
most since the first report (it slows the process down by half again).
``STATEGLASS_MEMTRACE_ONLY=watch,streamlit`` picks the processes. Off by default.

Example::

    STATEGLASS_MEMTRACE=/tmp/trace stateglass watch CHECKPOINTS --db state.duckdb
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable

ENV_DIR = "STATEGLASS_MEMTRACE"
ENV_EVERY = "STATEGLASS_MEMTRACE_EVERY"
ENV_ONLY = "STATEGLASS_MEMTRACE_ONLY"
ENV_TRACEMALLOC = "STATEGLASS_MEMTRACE_TRACEMALLOC"
# Frames kept per allocation: enough to name the caller of a dict's or a set's growth.
_FRAMES = 6
_TOP = 20

# name -> how many entries a long-lived structure holds now (see :func:`gauge`).
_GAUGES: dict[str, Callable[[], int]] = {}


def gauge(name: str, size: Callable[[], int]) -> None:
    """Report ``size()`` under ``name`` in every line (cheap: called once a period)."""
    _GAUGES[name] = size


# glibc's ``struct mallinfo2``, field by field.
_MALLINFO2 = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (*_MALLINFO2, "uordblks", "fordblks", "keepcost")]


def _malloc_mib() -> tuple[float, float]:
    """(bytes in use, bytes free but kept) of glibc's heap, in MiB; NaN elsewhere."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return float("nan"), float("nan")
    return (info.uordblks + info.hblkhd) / 2**20, info.fordblks / 2**20


_INFO_TOTAL = re.compile(rb'<(total|system) type="(fast|rest|mmap|current)"[^>]*size="(\d+)"')


def _arenas() -> tuple[int, float]:
    """(arenas, MiB glibc holds from the system in all of them); (0, NaN) elsewhere.

    Threads (DuckDB's, watchdog's) allocate in arenas of their own. DuckDB's tables and
    query buffers are not here: its jemalloc maps its own memory."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.fdopen.restype = ctypes.c_void_p
        libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
        libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        with tempfile.TemporaryFile() as fh:
            stream = libc.fdopen(os.dup(fh.fileno()), b"w")
            libc.malloc_info(0, stream)
            libc.fclose(stream)
            fh.seek(0)
            xml = fh.read()
    except (OSError, AttributeError):
        return 0, float("nan")
    # The totals over all arenas follow the last </heap>.
    tail = xml[xml.rfind(b"</heap>") :]
    sizes = {kind: int(size) for _, kind, size in _INFO_TOTAL.findall(tail)}
    return xml.count(b"<heap nr="), (sizes.get(b"current", 0) + sizes.get(b"mmap", 0)) / 2**20


def _rss_split_mib() -> tuple[float, float, float]:
    """(anonymous, file-backed, highest since the last call) resident MiB: code pages of
    libraries count in the second; the third is the peak of the scans in between."""
    found = {"RssAnon:": float("nan"), "RssFile:": float("nan"), "VmHWM:": float("nan")}
    try:
        with open("/proc/self/status") as fh:
            for row in fh:
                key, _, rest = row.partition("\t")
                if key in found:
                    found[key] = int(rest.split()[0]) / 1024
        # "5" resets the peak (VmHWM) to the current RSS (Linux 4.0 on; proc(5)).
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except (OSError, ValueError):
        pass
    return found["RssAnon:"], found["RssFile:"], found["VmHWM:"]


def _rss_mib() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def line(started: float) -> str:
    """One report: RSS, the allocators and the gauges."""
    used, free = _malloc_mib()
    arenas, held = _arenas()
    anon, mapped, peak = _rss_split_mib()
    parts = [
        f"t={time.monotonic() - started:.0f}s",
        f"rss={_rss_mib():.1f}MiB",
        f"rss_peak={peak:.1f}MiB",
        f"rss_anon={anon:.1f}MiB",
        f"rss_file={mapped:.1f}MiB",
        f"malloc_used={used:.1f}MiB",
        f"malloc_free={free:.1f}MiB",
        f"arenas={arenas}",
        f"malloc_held={held:.1f}MiB",
        # Python's arenas, thread stacks: anonymous memory that is not glibc's heap.
        f"rss_anon_other={anon - held:.1f}MiB",
        f"py_blocks={sys.getallocatedblocks()}",
    ]
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        parts.append(f"arrow={arrow.total_allocated_bytes() / 2**20:.1f}MiB")
    for name, size in sorted(_GAUGES.items()):
        try:
            parts.append(f"{name}={size()}")
        except Exception:  # a gauge read mid-update: skip it this once
            continue
    return " ".join(parts)


def _top(first: tracemalloc.Snapshot) -> list[str]:
    snap = tracemalloc.take_snapshot()
    current, _ = tracemalloc.get_traced_memory()
    lines = [f"  traced={current / 2**20:.1f}MiB"]
    for stat in snap.compare_to(first, "traceback")[:_TOP]:
        # Innermost frame first: where the growing objects were made, then who asked.
        frames = " <- ".join(
            f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(stat.traceback)
        )
        lines.append(f"  {stat.size_diff / 1024:+.0f} KiB ({stat.count_diff:+d}) {frames}")
    return lines


def start_from_env(name: str) -> bool:
    """Start reporting if :data:`ENV_DIR` names a directory; whether it started."""
    folder = os.environ.get(ENV_DIR)
    only = os.environ.get(ENV_ONLY)
    if not folder or (only and name not in only.split(",")):
        return False
    try:
        every = max(1.0, float(os.environ.get(ENV_EVERY, "60")))
    except ValueError:
        every = 60.0  # a debugging aid: a mistyped period must not stop the command
    traced = os.environ.get(ENV_TRACEMALLOC) == "1"
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}-{os.getpid()}.txt")
    started = time.monotonic()

    def loop() -> None:
        first = None
        while True:
            time.sleep(every)
            lines = [line(started)]
            if traced and first is None:
                # Traced from here on (imports under tracing take minutes): what the running
                # process adds after one more period is what it keeps.
                tracemalloc.start(_FRAMES)
                first = tracemalloc.take_snapshot()
            elif first is not None:
                lines += _top(first)
            with open(path, "a") as fh:
                fh.write("\n".join(lines) + "\n")

    threading.Thread(target=loop, name="memory-trace", daemon=True).start()
    return True
