"""Big stores: growth attribution and the neighbouring-version diff at 10M keys, old way and new.

Usage::

    .venv/bin/python benchmarks/bench_bigstore.py --workdir /work/bench-data/scale
        [--provider rocksdb --provider hdfs] [--only diff,growth,report] [--no-reference]
        [--scratch DIR]

Reuses the checkpoints ``bench_scale.py`` writes and caches under ``--workdir`` (10M keys,
64 partitions, 21 versions; run it first with ``--write-only``). For each provider, in one
warm process with empty caches, timing wall and CPU seconds of each:

* the diff of the last two versions as the Diff page computes it
  (``stateglass.app.browse.diff.compute_diff``: change files, or the SSTs the two RocksDB
  zips do not share) against two whole scans (every partition read at both versions and
  matched on key bytes, what it did before), rows compared kind by kind;
* growth attribution over the default window (10 versions) rolled forward
  (``attribute_growth``), then the same with a worker process per core (as the report
  runs it; CPU seconds include the workers'), against rebuilding every version
  (``roll=False``, the old way), results compared field by field;
* ``stateglass report --no-collect`` as a whole process on a database collected first.

``--no-reference`` skips the old ways (minutes at 10M keys). ``--scratch DIR`` puts the
report's database and output under ``DIR/<provider>`` (default: ``<provider>/bigstore`` in
``--workdir``; give one when the stores are shared read-only). The figures go to stdout as
Markdown, with the date and load averages, ready for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
sys.path[:0] = [ROOT, HERE]

from bench_scale import CPU, timed_tree  # noqa: E402
from bench_state_read import load_average  # noqa: E402

Rows = dict[str, set[tuple[int, bytes, bytes]]]


def cold() -> None:
    from stateglass.app.browse import store
    from stateglass.app.browse.diff import _RECENT
    from stateglass.collectors.checkpoints.state_views import SOURCES

    store.CACHE.clear()
    SOURCES._sources.clear()
    _RECENT.clear()


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    cold()
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - start, time.process_time() - cpu, result


def _rows(parts: Any) -> Rows:
    out: Rows = {"added": set(), "removed": set(), "changed": set()}
    for part in parts:
        p = part.after.partition

        def take(data: Any, items: Any, p: int = p) -> set[tuple[int, bytes, bytes]]:
            keys, values = data.keys, data.values
            return {(p, keys[int(i)].as_py(), values[int(i)].as_py()) for i in items}

        out["added"] |= take(part.after, part.added)
        out["removed"] |= take(part.before, part.removed)
        out["changed"] |= take(part.after, part.changed_after)
        out["changed"] |= {
            (p, k, b"before:" + v) for p, k, v in take(part.before, part.changed_before)
        }
    return out


def two_scans(view: Any, before: int, after: int) -> list[Any]:
    """The diff as it was: every partition read whole at both versions."""
    from stateglass.app.browse.diff import diff_partition
    from stateglass.app.browse.store import read_partition
    from stateglass.collectors.checkpoints.state_views import open_source

    source = open_source(view.keyed(open_source(view).row_codec))
    return [
        diff_partition(read_partition(source, before, p), read_partition(source, after, p))
        for p in source.partitions
    ]


def line(label: str, wall: float, cpu: float) -> str:
    return f"{label}: {wall:.1f} s (CPU {cpu:.1f} s), load {load_average()}"


def bench_diff(cp: str, reference: bool) -> None:
    from stateglass.app.browse.diff import compute_diff
    from stateglass.collectors.checkpoints.state_views import StateView, versions

    view = StateView(cp)
    found = versions(view)
    before, after = found[-2], found[-1]
    wall, cpu, result = timed(lambda: compute_diff(view, before, after))
    print(line(f"diff {before}->{after} (narrowed), counts {result.counts}", wall, cpu), flush=True)
    if not reference:
        return
    wall0, cpu0, parts = timed(lambda: two_scans(view, before, after))
    print(line("diff (two whole scans, the old way)", wall0, cpu0), flush=True)
    same = _rows(result.parts) == _rows(parts)
    print(f"diff rows identical: {same}; speed-up {wall0 / wall:.1f}x wall, {cpu0 / cpu:.1f}x CPU")


def bench_growth(cp: str, reference: bool) -> None:
    from stateglass.app.browse.growth import attribute_growth
    from stateglass.collectors.checkpoints.state_views import StateView

    view = StateView(cp)
    wall, cpu, new = timed(lambda: attribute_growth(view))
    print(
        line(
            f"growth (rolled), window {new.base}..{new.newest}, {new.new_keys:,} new keys",
            wall,
            cpu,
        ),
        flush=True,
    )
    jobs = os.cpu_count() or 1
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall2, cpu2, forked = timed(lambda: attribute_growth(view, jobs=jobs))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu2 += (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    print(line(f"growth (rolled, {jobs} worker processes, as the report)", wall2, cpu2))
    print(f"growth with workers identical: {forked == new}", flush=True)
    if not reference:
        return
    wall0, cpu0, old = timed(lambda: attribute_growth(view, roll=False))
    print(line("growth (every version rebuilt, the old way)", wall0, cpu0), flush=True)
    print(
        f"growth identical: {new == old}; speed-up {wall0 / wall:.1f}x wall, {cpu0 / cpu:.1f}x CPU"
    )


def bench_report(cp: str, scratch: str) -> None:
    stateglass = shutil.which("stateglass", path=os.path.dirname(PY)) or "stateglass"
    env = {**os.environ, "PYTHONPYCACHEPREFIX": os.path.join(scratch, "pycache")}
    db = os.path.join(scratch, "bigstore.duckdb")
    if not os.path.exists(db):
        wall, peak = timed_tree([stateglass, "collect", cp, "--db", db], None, env)
        print(f"collect (once, for the report): {wall:.1f} s", flush=True)
    html = os.path.join(scratch, "report.html")
    print(f"load before report: {load_average()}", flush=True)
    wall, peak = timed_tree(
        [stateglass, "report", cp, "--db", db, "--no-collect", "-o", html], None, env
    )
    print(
        f"report --no-collect (HTML): {wall:.1f} s (CPU {CPU['last']:.1f} s), "
        f"peak RSS {peak:.0f} MiB, load {load_average()}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True, help="bench_scale.py's --workdir")
    ap.add_argument("--provider", action="append", choices=("hdfs", "rocksdb"))
    ap.add_argument("--only", default="diff,growth,report")
    ap.add_argument("--no-reference", action="store_true", help="skip the old ways")
    ap.add_argument("--scratch", help="where the report's database and output go")
    args = ap.parse_args()
    only = set(args.only.split(","))
    print(
        f"date {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()} "
        f"{os.cpu_count()} cores, python {platform.python_version()}, load {load_average()}"
    )
    import pandas  # noqa: F401  # the dashboard's server has it loaded already

    for provider in args.provider or ["rocksdb", "hdfs"]:
        cp = os.path.join(os.path.abspath(args.workdir), provider, "checkpoint")
        if not os.path.isdir(os.path.join(cp, "commits")):
            print(f"\n### {provider}: no checkpoint at {cp} (run bench_scale.py --write-only)")
            continue
        print(f"\n### {provider}: {cp}", flush=True)
        if "diff" in only:
            bench_diff(cp, not args.no_reference)
        if "growth" in only:
            bench_growth(cp, not args.no_reference)
        if "report" in only:
            scratch = (
                os.path.join(os.path.abspath(args.scratch), provider)
                if args.scratch
                else os.path.join(os.path.abspath(args.workdir), provider, "bigstore")
            )
            os.makedirs(scratch, exist_ok=True)
            bench_report(cp, scratch)


if __name__ == "__main__":
    main()
