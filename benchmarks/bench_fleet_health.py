"""The Overview and a ``/metrics`` scrape over 500 checkpoints: stored verdicts against judging.

Usage::

    .venv/bin/python benchmarks/bench_fleet_health.py [--workdir DIR]

Builds the 500-checkpoint database of ``tests/app/test_overview_fleet.py`` (six real
checkpoints collected by a watcher's scanner, which stores their health verdicts; their rows
repeated under 494 more names). Then, each in a fresh process, on that database ("stored")
and on a copy without the stored verdicts ("judged": what every reader did before): the
Overview's first page in Streamlit's ``AppTest``, sorting it by health, and one scrape of
``stateglass metrics``' collector. Prints a Markdown table with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _overview() -> None:
    from stateglass.app.dashboard import context
    from stateglass.app.dashboard.views import overview

    context.live_status()
    overview.render()


def measure(db: str) -> dict[str, float]:
    """In this process: first page, sort by health, one scrape (seconds each)."""
    from streamlit.testing.v1 import AppTest

    from stateglass.app.metrics import HistoryCollector

    os.environ["STATEGLASS_DB"] = db
    at = AppTest.from_function(_overview, default_timeout=600)
    t = time.perf_counter()
    at.run()
    first = time.perf_counter() - t
    assert not at.exception, [e.value for e in at.exception]
    t = time.perf_counter()
    at.selectbox(key="sg_overview_sort").select("health (worst first)").run()
    sort = time.perf_counter() - t
    assert not at.exception, [e.value for e in at.exception]
    t = time.perf_counter()
    families = list(HistoryCollector(db).collect())
    scrape = time.perf_counter() - t
    assert any(f.name == "stateglass_health_status" and f.samples for f in families)
    return {"first page": first, "sort by health": sort, "scrape": scrape}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    import duckdb

    from tests.app.test_overview_fleet import build_fleet

    work = args.workdir or Path(tempfile.mkdtemp(prefix="sg-fleet-"))
    stored = build_fleet(work)
    judged = str(work / "judged.duckdb")
    shutil.copy(stored, judged)
    # The benchmark's own copy, as a database looked before the watcher stored verdicts.
    conn = duckdb.connect(judged)
    conn.execute("DELETE FROM health_findings")
    conn.execute("DELETE FROM health_judged")
    conn.close()
    print("| verdicts | first page | sort by health | one scrape | load (1 min) before → after |")
    print("|---|---:|---:|---:|---|")
    for label, db in (("stored by the watcher", stored), ("judged by the reader", judged)):
        before = os.getloadavg()[0]
        out = subprocess.run(
            [sys.executable, __file__, "--measure", db],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        times = json.loads(out.stdout.strip().splitlines()[-1])
        cells = " | ".join(f"{v:.2f} s" for v in times.values())
        print(f"| {label} | {cells} | {before:.1f} → {os.getloadavg()[0]:.1f} |")
    if args.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
