"""`stateglass report` on a store of 200 partitions × 1,000 versions: time and HTML size.

Usage::

    .venv/bin/python benchmarks/bench_report.py [--runs 3]

1. Builds (once, cached) the history DB of ``benchmarks/history_db.py``: the real 200×110
   checkpoint of ``bench_collect.py`` collected, its rows tiled to 1,000 versions.
2. Whole process, on a copy of that DB: ``stateglass report CP --db COPY -o r.html`` (which
   first collects the checkpoint incrementally: nothing is new, but it lists 23,600 files),
   the same with ``--no-collect``, and ``-o r.md``.
3. In process (warm imports): reading the DB (queries + health rules), building the figures,
   and writing the HTML, each timed.
The figures go to stdout as Markdown, ready for the "Reports" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from history_db import ensure_history_db, history_checkpoint  # noqa: E402


def machine() -> str:
    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if "model name" in line)
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "n/a"


def fmt(walls: list[float]) -> str:
    runs = ", ".join(f"{w:.2f}" for w in walls)
    return f"best {min(walls):.2f} s, median {statistics.median(walls):.2f} s (runs {runs})"


def whole_process(cp: str, db: str, out: str, runs: int, *extra: str) -> list[float]:
    stateglass = shutil.which("stateglass", path=os.path.dirname(sys.executable)) or "stateglass"
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([stateglass, "report", cp, "--db", db, "-o", out, *extra], check=True)
        walls.append(time.perf_counter() - start)
    return walls


def in_process(cp: str, db: str, out: str, runs: int) -> dict[str, list[float]]:
    from stateglass.app.report import charts, html
    from stateglass.app.report.model import load_report

    phases: dict[str, list[float]] = {"read": [], "figures": [], "html": [], "total": []}
    for _ in range(runs):
        t0 = time.perf_counter()
        data = load_report(db, cp)
        t1 = time.perf_counter()
        charts.chart_groups(data)  # what html.render does first, timed alone
        t2 = time.perf_counter()
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(html.render(data))
        t3 = time.perf_counter()
        phases["read"].append(t1 - t0)
        phases["figures"].append(t2 - t1)
        # render builds the figures again, then serializes and writes them.
        phases["html"].append(t3 - t2)
        phases["total"].append((t1 - t0) + (t3 - t2))
    return phases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    source_db = ensure_history_db()
    cp = history_checkpoint()
    from stateglass.collectors.db.read import read_query

    partitions, versions = read_query(
        str(source_db),
        "SELECT count(DISTINCT partition_id), count(DISTINCT version) FROM state_versions",
    )[0]
    with tempfile.TemporaryDirectory(prefix="sg-bench-report-") as tmp:
        db = os.path.join(tmp, "history.duckdb")
        shutil.copy(source_db, db)
        html_out, md_out = os.path.join(tmp, "r.html"), os.path.join(tmp, "r.md")
        print(f"\ndate {dt.datetime.now():%Y-%m-%d %H:%M}, machine: {machine()}")
        print(f"store: {partitions} partitions × {versions} versions ({source_db})")
        print(f"load average before: {loadavg()}\n")
        html_walls = whole_process(cp, db, html_out, args.runs)
        html_size = os.path.getsize(html_out)
        nocollect_walls = whole_process(cp, db, html_out, args.runs, "--no-collect")
        md_walls = whole_process(cp, db, md_out, args.runs)
        phases = in_process(cp, db, html_out, args.runs)
        with open(html_out, encoding="utf-8") as fh:
            text = fh.read()
        charts = text.split('data-charts="', 1)[1].split('"', 1)[0]
        figures_bytes = len(text) - text.index('id="sg-figures"')
        print(f"| `stateglass report -o r.html` (process, collect included) | {fmt(html_walls)} |")
        print(f"| `stateglass report --no-collect -o r.html` (process) | {fmt(nocollect_walls)} |")
        print(f"| `stateglass report -o r.md` (process, collect included) | {fmt(md_walls)} |")
        labels = {
            "read": "read the DB (queries + health rules)",
            "figures": "build the figures alone",
            "html": "render + write (figures, JSON, plotly.js)",
            "total": "read + render + write",
        }
        for name, walls in phases.items():
            print(f"| in process: {labels[name]} | {fmt(walls)} |")
        print(
            f"| HTML size | {html_size / 2**20:.2f} MiB ({charts} charts; chart JSON "
            f"{figures_bytes / 2**20:.2f} MiB, the rest is plotly.js and text) |"
        )
        print(f"\nload average after: {loadavg()}")


if __name__ == "__main__":
    main()
