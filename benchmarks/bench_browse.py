"""Time to the first page of a 1M-key version on the dashboard's Browse page.

Usage::

    .venv/bin/python benchmarks/bench_browse.py [--keys 1000000] [--runs 5] [--apptest]

1. Finds (or writes once, with ``bench_state_read.py``'s query) the checkpoint
   ``benchmarks/out/agg-hdfs-<keys>``: 4 partitions, 4 lz4 deltas each.
2. Times, in one warm process as the dashboard's server is, the function the Browse page
   calls (``stateglass.app.browse.table.iter_page``) with an empty in-memory cache (the files are in
   the OS page cache): until page 1 (50 rows) is there, and until the total is known. In
   one process (the default) and with a forked worker (``jobs=2``).
3. Then, on the cached version: another page, a first key search (renders key text), a
   second search, a diff of the last two versions, and one key's history.
4. ``--apptest``: once, the Browse page itself under Streamlit's ``AppTest`` (script run
   to its end, so the whole version is read), against a database collected from the
   checkpoint.

Prints figures ready for docs/benchmarks.md, with the load average at the time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, HERE]

from bench_state_read import OUT, PY, WRITE_CHECKPOINT  # noqa: E402

from stateglass.app.browse import store  # noqa: E402
from stateglass.app.browse.diff import _RECENT, compute_diff  # noqa: E402
from stateglass.app.browse.key_history import find_keys, key_history  # noqa: E402
from stateglass.app.browse.table import PageRequest, iter_page, read_page  # noqa: E402
from stateglass.collectors.checkpoints.state_views import SOURCES, StateView, versions  # noqa: E402


def checkpoint(keys: int) -> str:
    """The benchmark checkpoint, written by bench_state_read.py's query when missing."""
    cp = os.path.join(OUT, f"agg-hdfs-{keys}")
    if not os.path.isdir(os.path.join(cp, "commits")):
        os.makedirs(OUT, exist_ok=True)
        print(f"writing checkpoint {cp} with PySpark …", flush=True)
        subprocess.run([PY, "-c", WRITE_CHECKPOINT, str(keys), cp, "hdfs"], check=True)
    return cp


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def rss_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cold() -> None:
    """Forget every read partition and opened source (the files stay in the page cache)."""
    store.CACHE.clear()
    SOURCES._sources.clear()
    _RECENT.clear()


def first_page(view: StateView, version: int, jobs: int) -> tuple[float, float, int]:
    """Seconds to page 1, seconds to the total, and the total."""
    start = time.perf_counter()
    first = None
    total = 0
    for update in iter_page(PageRequest(view, version, page_size=50), jobs=jobs):
        if update.table is not None and first is None:
            first = time.perf_counter() - start
            assert update.table.num_rows == 50
        if update.total is not None:
            total = update.total
    return first or float("nan"), time.perf_counter() - start, total


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def summary(values: list[float]) -> str:
    return (
        f"best {min(values):.2f} s, median {statistics.median(values):.2f} s "
        f"(runs: {', '.join(f'{v:.2f}' for v in values)})"
    )


def apptest(cp: str) -> None:
    from streamlit.testing.v1 import AppTest

    from stateglass.app.collecting import new_scanner

    db = os.path.join(tempfile.mkdtemp(prefix="sg-bench-browse-"), "bench.duckdb")
    new_scanner(db).scan(cp)
    os.environ["STATEGLASS_DB"] = db

    def page() -> None:
        from stateglass.app.dashboard.views import browse

        browse.render()

    for label in ("cold cache", "warm cache"):
        if label == "cold cache":
            cold()
        at = AppTest.from_function(page, default_timeout=600)
        seconds, _ = timed(at.run)
        assert not at.exception, [e.value for e in at.exception]
        (table,) = at.dataframe
        shown = len(table.value)
        print(f"AppTest run of the Browse page, {label}: {seconds:.2f} s ({shown} rows shown)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--apptest", action="store_true")
    args = ap.parse_args()
    cp = checkpoint(args.keys)
    view = StateView(cp)
    version = versions(view)[-1]
    import pandas  # noqa: F401  # the server has it loaded: its first import is not a page's cost

    read_page(PageRequest(view, version, page_size=5), jobs=1)  # warm imports and generated code
    print(
        f"date {dt.datetime.now():%Y-%m-%d %H:%M}, {platform.machine()} {os.cpu_count()} cores, "
        f"python {platform.python_version()}, load average {loadavg()}"
    )
    for jobs, label in ((1, "one process (default)"), (2, "this process + 1 forked worker")):
        firsts, totals = [], []
        for _ in range(args.runs):
            cold()
            first, whole, total = first_page(view, version, jobs)
            firsts.append(first)
            totals.append(whole)
        print(f"{label}: page 1 of {total:,} rows: {summary(firsts)}")
        print(f"{label}: whole version read (total known): {summary(totals)}")
    print(f"load average {loadavg()}")
    cold()
    before = rss_mib()
    first_page(view, version, 1)
    size = store.CACHE.stats()[1]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"memory: cache {size / 2**20:.0f} MiB for the version; process RSS "
        f"{before:.0f} -> {rss_mib():.0f} MiB, peak {peak:.0f} MiB"
    )
    seconds, _ = timed(lambda: read_page(PageRequest(view, version, page=7000, page_size=50)))
    print(f"page 7,000 of the cached version: {seconds * 1000:.0f} ms")
    seconds, page = timed(lambda: read_page(PageRequest(view, version, search="key-0000012")))
    print(f"first key search (renders key text): {seconds:.2f} s, {page.total} rows")
    seconds, page = timed(lambda: read_page(PageRequest(view, version, search="KEY-00999")))
    print(f"second key search: {seconds:.2f} s, {page.total} rows")
    print(f"memory with key text: cache {store.CACHE.stats()[1] / 2**20:.0f} MiB")
    found = versions(view)
    seconds, result = timed(lambda: compute_diff(view, found[-2], found[-1]))
    print(
        f"diff of versions {found[-2]} and {found[-1]} (the older one read): {seconds:.2f} s, "
        f"{result.counts}"
    )
    _RECENT.clear()
    seconds, result = timed(lambda: compute_diff(view, found[-2], found[-1]))
    print(f"same diff again, both versions cached: {seconds:.2f} s")
    ref = find_keys(view, version, "key-00000042", limit=1)[0]
    seconds, table = timed(lambda: key_history(view, ref, found))
    print(f"key history over {len(found)} versions: {seconds:.2f} s ({table.num_rows} rows)")
    print(f"load average {loadavg()}")
    if args.apptest:
        apptest(cp)
        print(f"load average {loadavg()}")


if __name__ == "__main__":
    main()
