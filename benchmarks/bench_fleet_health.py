"""The Overview and a ``/metrics`` scrape over 500 checkpoints: stored verdicts against judging.

Usage::

    .venv/bin/python benchmarks/bench_fleet_health.py [--workdir DIR]

Builds the 500-checkpoint database of ``tests/app/test_overview_fleet.py`` (six real
checkpoints collected by a watcher's scanner, which stores their health verdicts and the facts
of the clock's rules; their rows repeated under 494 more names). Then, each in a fresh
process, on that database ("stored"), on a copy whose verdicts lack the clock's facts (so the
reader judges those rules per checkpoint, as before they were stored) and on a copy without
stored verdicts ("judged": what every reader did before that): the Overview's first page in
Streamlit's ``AppTest``, sorting it by health, and one scrape of ``stateglass metrics``'
collector. AppTest's own start-up (it scans every installed package for Streamlit
components, which a server does once when it starts) is a run of its own before the page's,
timed apart. Prints a Markdown table of wall and CPU seconds with the load average.

``--baseline REV`` first measures the stored database with the code of another commit
(``git archive``, imported ahead of the installed package; without the compiled
speedups, which these pages do not use): old and new back to back.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _overview() -> None:
    import streamlit as st

    if st.session_state.get("sg_bench_start_up"):
        return  # AppTest's start-up alone
    from stateglass.app.dashboard import context
    from stateglass.app.dashboard.views import overview

    context.live_status()
    overview.render()


def _timed(step: Callable[[], object]) -> list[float]:
    wall, cpu = time.perf_counter(), time.process_time()
    step()
    return [time.perf_counter() - wall, time.process_time() - cpu]


def measure(db: str) -> dict[str, list[float]]:
    """In this process: AppTest's start-up, first page, sort by health, one scrape
    (``[wall, CPU]`` seconds each)."""
    from streamlit.testing.v1 import AppTest

    from stateglass.app.metrics import HistoryCollector

    os.environ["STATEGLASS_DB"] = db
    at = AppTest.from_function(_overview, default_timeout=600)
    at.session_state["sg_bench_start_up"] = True
    times = {"AppTest start-up": _timed(at.run)}
    at.session_state["sg_bench_start_up"] = False
    times["first page"] = _timed(at.run)
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 24
    times["sort by health"] = _timed(
        at.selectbox(key="sg_overview_sort").select("health (worst first)").run
    )
    assert not at.exception, [e.value for e in at.exception]
    families: list[Any] = []
    times["one scrape"] = _timed(lambda: families.extend(HistoryCollector(db).collect()))
    assert any(f.name == "stateglass_health_status" and f.samples for f in families)
    return times


def _baseline(rev: str, work: Path) -> dict[str, str]:
    """The environment that imports StateGlass as commit ``rev`` had it."""
    src = work / f"src-{rev}"
    src.mkdir()
    archive = subprocess.run(
        ["git", "archive", rev], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    package = work / f"baseline-{rev}" / "stateglass"
    package.mkdir(parents=True)
    for layer in ("app", "collectors", "parsers"):
        (package / layer).symlink_to(src / layer)
    return {**os.environ, "PYTHONPATH": str(package.parent)}


def _run(label: str, db: str, env: dict[str, str] | None = None) -> None:
    before = os.getloadavg()[0]
    out = subprocess.run(
        [sys.executable, __file__, "--measure", db],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=env,
    )
    times = json.loads(out.stdout.strip().splitlines()[-1])
    cells = " | ".join(f"{wall:.2f} / {cpu:.2f} s" for wall, cpu in times.values())
    print(f"| {label} | {cells} | {before:.1f} → {os.getloadavg()[0]:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--skip-judged", action="store_true", help="leave out the copy without stored verdicts"
    )
    parser.add_argument("--baseline", default=None, help="a commit to measure first, e.g. main")
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    import duckdb

    from tests.app.test_overview_fleet import build_fleet

    work = args.workdir or Path(tempfile.mkdtemp(prefix="sg-fleet-"))
    stored = build_fleet(work)
    # The benchmark's own copies, as a database looked before the watcher stored the clock
    # rules' facts, and before it stored verdicts at all.
    without_facts, judged = str(work / "without-facts.duckdb"), str(work / "judged.duckdb")
    for copy, statements in (
        (without_facts, ["UPDATE health_judged SET clock_facts = NULL"]),
        (judged, ["DELETE FROM health_findings", "DELETE FROM health_judged"]),
    ):
        shutil.copy(stored, copy)
        conn = duckdb.connect(copy)
        for statement in statements:
            conn.execute(statement)
        conn.close()
    steps = ("AppTest start-up", "first page", "sort by health", "one scrape")
    print(f"| verdicts (wall / CPU) | {' | '.join(steps)} | load (1 min) before → after |")
    print("|---|" + "---:|" * len(steps) + "---|")
    if args.baseline:
        _run(f"stored, the code of {args.baseline}", stored, _baseline(args.baseline, work))
    for label, db in (
        ("stored, with the clock rules' facts", stored),
        ("stored, clock rules judged by the reader", without_facts),
        ("judged by the reader", judged),
    ):
        if not (args.skip_judged and db == judged):
            _run(label, db)
    if args.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
