"""Server time of the dashboard's Overview, Query and State pages on a big history database.

Usage::

    .venv/bin/python benchmarks/bench_dashboard.py [--runs 5] [--db PATH]

The database (``history_db.ensure_history_db()``) holds one store of 200 partitions × 1,000
state versions (200,000 ``state_versions`` rows) and about 1,000 batches. Each page is run
in Streamlit's ``AppTest`` (the script runs exactly as in the server, minus the browser):

* **cold**: the caches cleared first, so every query runs and every figure is built (as after
  a collector commit);
* **warm**: the same page again, cached loads and figures (a widget change, another viewer).

Before the runs one untimed pass imports every module. A breakdown (query, figure build,
figure JSON) of the cold State page follows, from calling the same functions directly.
The figures go to stdout as Markdown, ready for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _p in (ROOT, HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

PAGES = ("overview", "query", "state")
BUDGET_S = 2.0


def _page(name: str) -> None:
    """One dashboard page as main.py runs it (AppTest runs this function's source)."""
    import importlib

    from stateglass.app.dashboard import context

    context.live_status()
    importlib.import_module(f"stateglass.app.dashboard.views.{name}").render()


def time_page(name: str, runs: int) -> tuple[list[float], list[float], list[float]]:
    """Cold and warm server seconds of ``runs`` runs of one page, and the cold CPU seconds.

    CPU seconds (all threads of this process) barely move with other processes' load; wall
    seconds do, on a shared machine.
    """
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    cold: list[float] = []
    warm: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        st.cache_data.clear()
        st.cache_resource.clear()  # the cached figures too
        at = AppTest.from_function(_page, args=(name,), default_timeout=120)
        start, start_cpu = time.perf_counter(), time.process_time()
        at.run()
        cold.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        if at.exception:
            raise RuntimeError(f"{name}: {[e.value for e in at.exception]}")
        start = time.perf_counter()
        at.run()
        warm.append(time.perf_counter() - start)
    return cold, warm, cpu


def breakdown(db: str) -> list[tuple[str, float]]:
    """Seconds per step of the State page, called directly (no Streamlit)."""
    import plotly.io as pio

    from stateglass.app import figures, queries

    cp = str(queries.checkpoint_overview(db)["checkpoint"].iloc[0])
    store = (cp, 0, "default")
    steps: list[tuple[str, float]] = []

    def timed(label: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        out = fn()
        steps.append((label, time.perf_counter() - start))
        return out

    versions = timed(
        "query partition_cells (200,000 rows)", lambda: queries.partition_cells(db, *store)
    )
    skew = timed("query partition_skew", lambda: queries.partition_skew(db, *store))
    lag = timed("query snapshot_lag", lambda: queries.snapshot_lag(db, *store))
    growth = timed("query state_growth", lambda: queries.state_growth(db, *store))
    kinds = timed("query bytes_by_kind", lambda: queries.bytes_by_kind(db, *store))
    figs = [
        timed("figure keys_over_versions", lambda: figures.keys_over_versions(versions)),
        timed("figure partition_heatmap (keys)", lambda: figures.partition_heatmap(versions)),
        timed("figure skew_over_time", lambda: figures.skew_over_time(skew)),
        timed("figure key_changes", lambda: figures.key_changes(growth)),
        timed("figure bytes_by_kind", lambda: figures.bytes_by_kind(kinds)),
        timed("figure snapshot_lag", lambda: figures.snapshot_lag(lag)),
    ]
    start = time.perf_counter()
    size = sum(len(pio.to_json(f, validate=False)) for f in figs)
    steps.append((f"figure JSON, all six ({size / 2**20:.1f} MiB)", time.perf_counter() - start))
    return steps


def _load() -> str:
    if not os.path.exists("/proc/loadavg"):
        return "n/a"
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--db", default=None, help="default: history_db.ensure_history_db()")
    args = ap.parse_args()
    if args.db is None:
        from history_db import ensure_history_db

        args.db = str(ensure_history_db())
    os.environ["STATEGLASS_DB"] = os.path.abspath(args.db)
    import logging

    # AppTest outside `streamlit run` logs a "missing ScriptRunContext" line per cache call.
    logging.getLogger("streamlit").setLevel(logging.ERROR)

    for name in PAGES:  # imports, plotly's lazy validators: not part of a page's time
        time_page(name, 1)
    load_before = _load()
    rows = []
    for name in PAGES:
        cold, warm, cpu = time_page(name, args.runs)
        rows.append(
            (
                name,
                statistics.median(cold),
                max(cold),
                statistics.median(cpu),
                statistics.median(warm),
            )
        )
    load_after = _load()
    steps = breakdown(args.db)

    print(
        f"Dashboard pages, {dt.date.today()}, {platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; load average {load_before} before, "
        f"{load_after} after; {args.runs} runs per page, median (max)."
    )
    print()
    print("| page | cold: cache cleared (s) | cold, CPU (s) | warm: cached (s) | < 2 s |")
    print("|---|---|---|---|---|")
    for name, cold_med, cold_max, cpu_med, warm_med in rows:
        ok = "yes" if cold_med < BUDGET_S else "NO"
        print(
            f"| {name} | {cold_med:.2f} ({cold_max:.2f}) | {cpu_med:.2f} | {warm_med:.2f} | {ok} |"
        )
    print()
    print("| State page, cold, step by step | s |")
    print("|---|---|")
    for label, seconds in steps:
        print(f"| {label} | {seconds:.3f} |")


if __name__ == "__main__":
    main()
