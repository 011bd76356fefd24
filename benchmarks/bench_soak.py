"""Soak: `watch`, the dashboard and `metrics` side by side for ``--minutes`` over live queries.

Usage::

    .venv/bin/python benchmarks/bench_soak.py [--minutes 30] [--queries 20] [--trigger 2]
        [--warmup 5] [--workdir DIR] [--no-browser]

1. One PySpark driver (``local[2]``) runs ``--queries`` streaming queries, each
   ``groupBy(value % 500).count()`` over the rate source with a ``--trigger``-second
   processing-time trigger and 4 shuffle partitions, HDFS and RocksDB providers
   alternating, each into its own checkpoint under ``WORKDIR/checkpoints``.
2. ``stateglass watch WORKDIR/checkpoints`` writes the database; ``stateglass dashboard``
   serves it (no PATH: it only reads) with one headless Chromium keeping the Overview open
   (its live fragment re-runs the page when the database changes); ``stateglass metrics``
   serves /metrics, scraped every ``--scrape`` seconds as Prometheus would.
3. Every ``--sample`` seconds: the resident set (RSS) and CPU seconds of each of the three
   (process trees: the dashboard's browser is not counted). Every second: the Overview page's
   own query (``queries.checkpoint_overview``, what the page shows as each checkpoint's last
   committed batch), so that each commit's ``commits/N`` file time can be matched with the
   first moment the page's data and a /metrics scrape show it.
4. At the end the queries stop, the watcher gets ``--settle`` seconds to catch up, and every
   batch committed in every checkpoint must be in the database (``batches``, committed) with
   its state version (``state_versions``, version = batch + 1, every store).

RSS growth is judged after ``--warmup`` minutes (the first minutes fill caches and the
database), three ways: the median of the last minute against the median of the minute after
the warmup; the same with 5-minute windows; and the 10th percentile of the last 5-minute
window against that of the first whole one after the warmup (what stays between scans). A
table gives each 5-minute window's median, 10th percentile and max; every sample goes to
``WORKDIR/rss.csv``.
The figures go to stdout as Markdown, ready for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
sys.path[:0] = [ROOT, HERE]

from bench_state_read import _tree_rss_kib, load_average  # noqa: E402

RUN_QUERIES = r"""
import os, sys, time
from pyspark.sql import SparkSession, functions as F
root, n, trigger, retain = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.streaming.minBatchesToRetain", retain)
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "4")
         .config("spark.driver.memory", "2g").config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
rocks = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
hdfs = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
queries = []
for i in range(n):
    # The provider is read when a query starts (and kept in its offset log).
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", rocks if i % 2 else hdfs)
    q = (spark.readStream.format("rate").option("rowsPerSecond", 20).load()
         .groupBy((F.col("value") % 500).alias("k")).count()
         .writeStream.format("noop").outputMode("update")
         .option("checkpointLocation", os.path.join(root, f"q{i:02d}"))
         .trigger(processingTime=f"{trigger} seconds").start())
    queries.append(q)
print("started", flush=True)
try:
    while not os.path.exists(os.path.join(root, "..", "stop")):
        time.sleep(0.5)
finally:
    for q in queries:
        q.stop()
    spark.stop()
"""

BROWSER = r"""
import sys, time
from playwright.sync_api import sync_playwright
url, chromium, stop = sys.argv[1], sys.argv[2], sys.argv[3]
import os
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    page = browser.new_page()
    page.goto(url, timeout=300_000)
    print("opened", flush=True)
    while not os.path.exists(stop):
        time.sleep(1)
    browser.close()
"""


@dataclass
class Series:
    """RSS (MiB) and CPU seconds of one process tree, sampled over the run."""

    pid: int
    times: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def tree_cpu_seconds(pid: int) -> float:
    """User + system seconds of ``pid`` and its live children (reaped ones included)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for p in [pid, *_children(pid)]:
        try:
            with open(f"/proc/{p}/stat", "rb") as fh:
                f = fh.read().rsplit(b")", 1)[1].split()
            total += (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / tick
        except OSError:
            continue
    return total


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            kids = [int(x) for x in fh.read().split()]
    except OSError:
        return out
    for kid in kids:
        out += [kid, *_children(kid)]
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def committed(cp: str) -> dict[int, float]:
    """Committed batch id -> the commit file's mtime."""
    folder = os.path.join(cp, "commits")
    if not os.path.isdir(folder):
        return {}
    out = {}
    for name in os.listdir(folder):
        if name.isdigit():
            try:
                out[int(name)] = os.stat(os.path.join(folder, name)).st_mtime
            except FileNotFoundError:
                continue
    return out


def new_commits(cp: str, seen: dict[tuple[str, int], float]) -> None:
    """Add the batches committed in ``cp`` since the last call to ``seen`` (with the commit
    file's mtime): Spark purges old commit files, so the run's batches are gathered as they
    come (a commit file lives ``--retain`` batches, minutes at these rates)."""
    real = os.path.realpath(cp)
    try:
        names = os.listdir(os.path.join(cp, "commits"))
    except OSError:
        return
    for name in names:
        if name.isdigit() and (real, int(name)) not in seen:
            try:
                seen[(real, int(name))] = os.stat(os.path.join(cp, "commits", name)).st_mtime
            except FileNotFoundError:
                continue


def page_batches(db: str) -> dict[str, int]:
    """What the Overview shows as each checkpoint's last committed batch."""
    from stateglass.app import queries

    if not os.path.exists(db):
        return {}
    try:
        frame = queries.checkpoint_overview(db)
    except Exception:  # the watcher holds the write lock a moment: next second
        return {}
    return {
        os.path.realpath(str(r.checkpoint)): int(r.last_committed_batch)
        for r in frame.itertuples()
        if r.last_committed_batch == r.last_committed_batch  # not NaN
        and r.last_committed_batch is not None
    }


_GAUGE = re.compile(r'^stateglass_last_committed_batch\{checkpoint="([^"]*)"\} (\S+)$', re.M)


def scrape(url: str) -> tuple[dict[str, int], float]:
    """/metrics' last committed batch per checkpoint, and the scrape's seconds."""
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            text = resp.read().decode()
    except OSError:
        return {}, time.perf_counter() - start
    took = time.perf_counter() - start
    found = {}
    for cp, value in _GAUGE.findall(text):
        found[os.path.realpath(cp.replace('\\"', '"').replace("\\\\", "\\"))] = int(float(value))
    return found, took


def first_seen(shown: dict[str, int], seen: dict[tuple[str, int], float], now: float) -> None:
    """Mark every batch up to each checkpoint's shown one as seen now (if not already)."""
    for cp, batch in shown.items():
        for b in range(batch, -1, -1):
            if (cp, b) in seen:
                break
            seen[(cp, b)] = now


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args} ended with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer in {timeout} s")


def db_lost(db: str, seen: dict[tuple[str, int], float]) -> tuple[int, int, int]:
    """(batches seen committed, missing from ``batches``, missing a state version in some
    store)."""
    from stateglass.collectors.db.read import read_query

    total = lost_batches = lost_versions = 0
    rows = read_query(db, "SELECT checkpoint, batch_id FROM batches WHERE committed")
    have = {(os.path.realpath(c), int(b)) for c, b in rows}
    stores = read_query(
        db,
        "SELECT checkpoint, operator_id, store_name, list(DISTINCT version) "
        "FROM state_versions GROUP BY ALL",
    )
    versions: dict[str, list[set[int]]] = {}
    for c, _, _, vs in stores:
        versions.setdefault(os.path.realpath(c), []).append(set(vs))
    for real, b in seen:
        total += 1
        lost_batches += (real, b) not in have
        per_store = versions.get(real, [set()])
        lost_versions += any(b + 1 not in vs for vs in per_store)
    return total, lost_batches, lost_versions


def latencies(
    commits: dict[tuple[str, int], float], seen: dict[tuple[str, int], float]
) -> list[float]:
    return sorted(seen[k] - t for k, t in commits.items() if k in seen)


def pct(values: list[float], q: float) -> str:
    if not values:
        return "—"
    return f"{values[min(len(values) - 1, int(q * len(values)))]:.1f} s"


def growth(s: Series, warmup_s: float, window_s: float = 60.0) -> tuple[float, float, float]:
    """(median MiB of the ``window_s`` after the warmup, of the last ``window_s``, growth %).

    A watcher's RSS rises and falls by a third with each scan of 20 checkpoints: one minute
    holds a handful of scans, so its median moves with how many were in flight; a longer
    window shows the trend.
    """
    after = [r for t, r in zip(s.times, s.rss, strict=True) if warmup_s <= t < warmup_s + window_s]
    end = s.times[-1] if s.times else 0.0
    last = [r for t, r in zip(s.times, s.rss, strict=True) if t >= end - window_s]
    if not after or not last:
        return 0.0, 0.0, 0.0
    a, b = statistics.median(after), statistics.median(last)
    return a, b, (b - a) / a * 100 if a else 0.0


def windows(s: Series, width_s: float = 300.0) -> list[tuple[int, float, float, float]]:
    """(first minute, median, 10th percentile, max) of the RSS samples of each ``width_s``
    window from the start. The median is what the process holds with the usual scans in
    flight, the 10th percentile what stays between them, the max the highest sample."""
    found: dict[int, list[float]] = {}
    for t, r in zip(s.times, s.rss, strict=True):
        found.setdefault(int(t // width_s), []).append(r)
    out = []
    for k, rss in sorted(found.items()):
        rss.sort()
        p10 = rss[int(0.1 * (len(rss) - 1))]
        out.append((int(k * width_s / 60), statistics.median(rss), p10, rss[-1]))
    return out


def floor_growth(s: Series, warmup_s: float, width_s: float = 300.0) -> float:
    """Growth % of the 10th percentile: the first whole window after the warmup to the last."""
    picked = [w for w in windows(s, width_s) if w[0] * 60 >= warmup_s]
    if len(picked) < 2 or not picked[0][2]:
        return 0.0
    return (picked[-1][2] - picked[0][2]) / picked[0][2] * 100


def start(cmd: list[str], log: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, stdout=fh, stderr=fh, env=env, start_new_session=True)


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--trigger", type=float, default=2.0, help="seconds between triggers")
    ap.add_argument("--warmup", type=float, default=5.0, help="minutes before RSS is judged")
    ap.add_argument(
        "--retain",
        type=int,
        default=100,
        help="Spark's minBatchesToRetain (its default 100): fewer reach a steady file count sooner",
    )
    ap.add_argument("--sample", type=float, default=5.0, help="seconds between RSS samples")
    ap.add_argument("--scrape", type=float, default=10.0, help="seconds between scrapes")
    ap.add_argument("--settle", type=float, default=120.0, help="seconds to catch up at the end")
    ap.add_argument("--workdir", default=None, help="default: a new temporary directory")
    ap.add_argument("--no-browser", action="store_true", help="no Chromium on the Overview")
    ap.add_argument(
        "--memtrace",
        action="store_true",
        help="the three report their allocators and caches every minute (app/memory_trace.py)",
    )
    args = ap.parse_args()
    work = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="sg-soak-"))
    if os.path.commonpath([work, ROOT]) == ROOT:
        raise SystemExit(f"--workdir {work} is inside the repository: pick another")
    cps_root = os.path.join(work, "checkpoints")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(cps_root)
    db = os.path.join(work, "soak.duckdb")
    env = {**os.environ, "PYTHONPYCACHEPREFIX": os.path.join(work, "pycache")}
    if args.memtrace:
        env.update(
            STATEGLASS_MEMTRACE=os.path.join(work, "memtrace"),
            STATEGLASS_MEMTRACE_ONLY="watch,streamlit,metrics",
            STATEGLASS_MEMTRACE_EVERY=os.environ.get("STATEGLASS_MEMTRACE_EVERY", "60"),
        )
    sg = shutil.which("stateglass", path=os.path.dirname(PY)) or "stateglass"
    print(
        f"date {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()} "
        f"{os.cpu_count()} cores, python {platform.python_version()}, load {load_average()}; "
        f"{args.queries} queries, {args.trigger:g} s triggers, {args.minutes:g} min",
        flush=True,
    )
    procs: dict[str, subprocess.Popen[bytes]] = {}
    browser: subprocess.Popen[bytes] | None = None
    try:
        procs["spark"] = start(
            [
                PY,
                "-c",
                RUN_QUERIES,
                cps_root,
                str(args.queries),
                str(args.trigger),
                str(args.retain),
            ],
            os.path.join(work, "spark.log"),
            env,
        )
        checkpoints = [os.path.join(cps_root, f"q{i:02d}") for i in range(args.queries)]
        _wait_first_commits(checkpoints, procs["spark"], 900)
        print(f"every query committed a batch; load {load_average()}", flush=True)
        dash_port, metrics_port = free_port(), free_port()
        procs["watch"] = start([sg, "watch", cps_root, "--db", db], f"{work}/watch.log", env)
        _wait_first_scan(db, procs["watch"], 900)
        print(f"the watcher's first scan is in; load {load_average()}", flush=True)
        procs["dashboard"] = start(
            [sg, "dashboard", "--db", db, "--headless", "--port", str(dash_port)],
            f"{work}/dashboard.log",
            env,
        )
        procs["metrics"] = start(
            [sg, "metrics", "--db", db, "--port", str(metrics_port)], f"{work}/metrics.log", env
        )
        wait_http(f"http://127.0.0.1:{dash_port}/_stcore/health", procs["dashboard"], 300)
        wait_http(f"http://127.0.0.1:{metrics_port}/metrics", procs["metrics"], 300)
        if not args.no_browser:
            browser = start(
                [
                    PY,
                    "-c",
                    BROWSER,
                    f"http://127.0.0.1:{dash_port}/",
                    "/usr/bin/chromium",
                    os.path.join(work, "browser-stop"),
                ],
                f"{work}/browser.log",
                env,
            )
        result = _run(args, procs, checkpoints, db, f"http://127.0.0.1:{metrics_port}/metrics")
        open(os.path.join(work, "stop"), "w").close()
        procs["spark"].wait(300)
        result["settle_s"] = _settle(checkpoints, db, args.settle)
        seen = result["seen"]
        assert isinstance(seen, dict)
        for cp in checkpoints:
            new_commits(cp, seen)
        result["lost"] = db_lost(db, seen)
        series = result["series"]
        assert isinstance(series, dict)
        save_samples(series, os.path.join(work, "rss.csv"))
        _report(args, result)
        if args.memtrace:
            memtrace_report(os.path.join(work, "memtrace"))
    finally:
        open(os.path.join(work, "browser-stop"), "w").close()
        open(os.path.join(work, "stop"), "w").close()
        stop(browser)
        for p in procs.values():
            stop(p)
        print(f"\nlogs and database in {work}")


def _wait_first_commits(checkpoints: list[str], spark: subprocess.Popen[bytes], t: float) -> None:
    start_t = time.monotonic()
    while not all(committed(cp) for cp in checkpoints):
        if spark.poll() is not None:
            raise SystemExit(f"the Spark driver ended with {spark.returncode}")
        if time.monotonic() - start_t > t:
            raise SystemExit(f"not every query committed a batch in {t:.0f} s")
        time.sleep(1)


def _wait_first_scan(db: str, watch: subprocess.Popen[bytes], t: float) -> None:
    """Until the database exists with a checkpoint in it (``metrics`` refuses a missing one)."""
    start_t = time.monotonic()
    while not page_batches(db):
        if watch.poll() is not None:
            raise SystemExit(f"watch ended with {watch.returncode}")
        if time.monotonic() - start_t > t:
            raise SystemExit(f"no checkpoint in {db} after {t:.0f} s")
        time.sleep(1)


def _run(
    args: argparse.Namespace,
    procs: dict[str, subprocess.Popen[bytes]],
    checkpoints: list[str],
    db: str,
    metrics_url: str,
) -> dict[str, object]:
    """The soak itself: samples, page probes and scrapes for ``--minutes``."""
    series = {name: Series(procs[name].pid) for name in ("watch", "dashboard", "metrics")}
    page_seen: dict[tuple[str, int], float] = {}
    scrape_seen: dict[tuple[str, int], float] = {}
    scrape_s: list[float] = []
    seen: dict[tuple[str, int], float] = {}
    for cp in checkpoints:
        new_commits(cp, seen)
    before = set(seen)
    t0 = time.monotonic()
    next_sample = next_scrape = 0.0
    end = args.minutes * 60
    while (now := time.monotonic() - t0) < end:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise SystemExit(f"{name} ended with {proc.returncode} after {now:.0f} s")
        if now >= next_sample:
            for s in series.values():
                s.times.append(now)
                s.rss.append(_tree_rss_kib(s.pid) / 1024)
                s.cpu.append(tree_cpu_seconds(s.pid))
            next_sample += args.sample
            minute = int(now // 60)
            if len(series["watch"].times) % max(1, int(60 / args.sample)) == 1:
                print(
                    f"{minute:3d} min: RSS "
                    + ", ".join(f"{n} {s.rss[-1]:.0f} MiB" for n, s in series.items())
                    + f"; load {load_average()}",
                    flush=True,
                )
        for cp in checkpoints:
            new_commits(cp, seen)
        first_seen(page_batches(db), page_seen, time.time())
        if now >= next_scrape:
            shown, took = scrape(metrics_url)
            scrape_s.append(took)
            first_seen(shown, scrape_seen, time.time())
            next_scrape += args.scrape
        time.sleep(1.0)
    for cp in checkpoints:
        new_commits(cp, seen)
    commits = {k: t for k, t in seen.items() if k not in before}
    return {
        "seen": seen,
        "series": series,
        "page": latencies(commits, page_seen),
        "scrape": latencies(commits, scrape_seen),
        "scrape_s": sorted(scrape_s),
        "commits": len(commits),
        "elapsed": time.monotonic() - t0,
    }


def _settle(checkpoints: list[str], db: str, limit: float) -> float:
    """Seconds until the database has every committed batch (or ``limit``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        shown = page_batches(db)
        if all(
            shown.get(os.path.realpath(cp), -1) >= max(committed(cp), default=-1)
            for cp in checkpoints
        ):
            break
        time.sleep(1)
    return time.monotonic() - t0


def _report(args: argparse.Namespace, r: dict[str, object]) -> None:
    series = r["series"]
    assert isinstance(series, dict)
    elapsed = float(r["elapsed"])  # type: ignore[arg-type]
    print(f"\nload at the end: {load_average()}\n")
    print(
        "| process | RSS after warmup (median, MiB) | RSS last minute | growth | "
        "growth, 5-minute windows | growth, 5-minute 10th percentiles | peak RSS "
        "| CPU (share of a core) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, s in series.items():
        a, b, g = growth(s, args.warmup * 60)
        g5 = growth(s, args.warmup * 60, 300.0)[2]
        f5 = floor_growth(s, args.warmup * 60)
        share = (s.cpu[-1] - s.cpu[0]) / (s.times[-1] - s.times[0]) if len(s.times) > 1 else 0
        print(
            f"| `{name}` | {a:.0f} | {b:.0f} | **{g:+.1f} %** | **{g5:+.1f} %** | {f5:+.1f} % "
            f"| {max(s.rss):.0f} | {share:.0%} |"
        )
    _window_table(series)
    page, scrape_l, scrape_s = r["page"], r["scrape"], r["scrape_s"]
    assert isinstance(page, list) and isinstance(scrape_l, list) and isinstance(scrape_s, list)
    total, lost_b, lost_v = r["lost"]  # type: ignore[misc]
    print()
    print("| what | value |")
    print("|---|---|")
    print(f"| run | {elapsed / 60:.1f} min, {args.queries} queries, {args.trigger:g} s triggers |")
    print(f"| batches committed during the run | {r['commits']} |")
    print(
        f"| commit to the Overview's data (p50 / p95 / max) | {pct(page, 0.5)} / "
        f"{pct(page, 0.95)} / {pct(page, 1.0)} ({len(page)} commits) |"
    )
    print(
        f"| commit to a /metrics scrape (p50 / p95 / max; scrapes every {args.scrape:g} s) | "
        f"{pct(scrape_l, 0.5)} / {pct(scrape_l, 0.95)} / {pct(scrape_l, 1.0)} |"
    )
    print(
        f"| one /metrics scrape (p50 / p95 / max) | {pct(scrape_s, 0.5)} / "
        f"{pct(scrape_s, 0.95)} / {pct(scrape_s, 1.0)} |"
    )
    print(f"| catching up after the queries stopped | {float(r['settle_s']):.0f} s |")  # type: ignore[arg-type]
    print(
        f"| versions lost (committed, not in the database) | **{lost_b}** batches, "
        f"**{lost_v}** state versions, of {total} committed |"
    )


def _window_table(series: dict[str, Series]) -> None:
    """RSS per 5-minute window: median / 10th percentile / max of the samples, per process."""
    print("\nRSS per 5-minute window (median / 10th percentile / max of the samples, MiB):\n")
    print("| minutes | " + " | ".join(f"`{n}`" for n in series) + " |")
    print("|---" * (len(series) + 1) + "|")
    rows = {n: windows(s) for n, s in series.items()}
    for i, (minute, *_) in enumerate(next(iter(rows.values()), [])):
        cells = [
            f"{w[1]:.0f} / {w[2]:.0f} / {w[3]:.0f}" if (w := rows[n][i]) else ""
            for n in series
            if i < len(rows[n])
        ]
        print(f"| {minute}–{minute + 5} | " + " | ".join(cells) + " |")


def save_samples(series: dict[str, Series], path: str) -> None:
    """Every sample as CSV (process, seconds, RSS MiB, CPU s), for figures read again later."""
    with open(path, "w") as fh:
        fh.write("process,t_s,rss_mib,cpu_s\n")
        for name, s in series.items():
            for t, r, c in zip(s.times, s.rss, s.cpu, strict=True):
                fh.write(f"{name},{t:.1f},{r:.1f},{c:.2f}\n")


_FIELD = re.compile(r"(\w+)=([-\d.]+)")


def memtrace_report(folder: str, every: int = 5) -> None:
    """Every ``every``-th line of each process's memory report, as a table."""
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        with open(os.path.join(folder, name)) as fh:
            rows = [dict(_FIELD.findall(x)) for x in fh if x.startswith("t=")]
        if not rows:
            continue
        picked = rows[every - 1 :: every]
        if not picked or picked[-1] is not rows[-1]:
            picked.append(rows[-1])
        keys = [k for k in rows[-1] if k != "t"]
        print(f"\n{name.split('-')[0]} (minutes since it started; MiB or entries)\n")
        print("| min | " + " | ".join(keys) + " |")
        print("|---" * (len(keys) + 1) + "|")
        for r in picked:
            cells = [r.get(k, "") for k in keys]
            print(f"| {float(r['t']) / 60:.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
