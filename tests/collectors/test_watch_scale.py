"""``watch`` scales with the number of store directories: a handful of inotify watches per
checkpoint, an idle process between batches, and every commit recorded.

The checkpoint is a real stream-stream join (four stores per partition) written by PySpark
with many shuffle partitions. The 2,000 partitions watch must scale to (10,000 directories)
take Spark minutes per batch on a 2-core CI machine, so the first test uses ``PARTITIONS`` and
asserts what makes the size irrelevant — the watcher's inotify watches do not grow with the
directories — while ``benchmarks/bench_watch.py`` measures the full 2,000 × 4 checkpoint
(docs/benchmarks.md). The second test runs ``watch`` on store directories tiled from the
real join sample's files, its last two batches replayed into place as Spark writes them: 500
and the full 10,000, both ``benchmark`` cases (``make bench-tests``): tiling and scanning
that measure the size rather than check other behaviour.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.db.read import read_query
from tests.conftest import ROOT, SAMPLES

# 8 partitions × 4 stores already hold ten times the 3 watches; the tiled 500- and
# 10,000-store cases below cover the size.
PARTITIONS = 8
# Two seconds are 200 clock ticks: 5 % of a core is 10 of them, well above the resolution.
IDLE_S = 2.0
MAX_IDLE_CPU = 0.05


def write_side(src: Path, side: str, batch: int) -> None:
    rng = random.Random(f"{side}-{batch}")
    folder = src / side
    folder.mkdir(parents=True, exist_ok=True)
    rows = "".join(
        json.dumps({"k": rng.randrange(5000), "v": i}) + "\n" for i in range(PARTITIONS * 4)
    )
    staging = folder / f".part-{batch}.tmp"
    staging.write_text(rows)
    staging.rename(folder / f"part-{batch:03d}.json")


def run_join(spark: Any, src: Path, cp: Path) -> None:
    """One run of the join over every new file (one batch per file), then stop."""
    from pyspark.sql import functions as F

    def side(name: str) -> Any:
        return (
            spark.readStream.schema("k LONG, v LONG")
            .option("maxFilesPerTrigger", 1)
            .json(str(src / name))
        )

    left = side("left").select(F.col("k").alias("lk"), F.col("v").alias("lv"))
    right = side("right").select(F.col("k").alias("rk"), F.col("v").alias("rv"))
    query = (
        left.join(right, F.col("lk") == F.col("rk"))
        .writeStream.format("noop")
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    query.stop()


@pytest.fixture
def join_conf(spark: Any) -> Iterator[None]:
    conf = {
        "spark.sql.shuffle.partitions": str(PARTITIONS),
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        ),
    }
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    yield
    for k, v in old.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def start_watch(cp: Path, db: str, log: Path, *flags: str) -> subprocess.Popen[bytes]:
    """``stateglass watch CP --db DB FLAGS…``, the real CLI in a child process, its output to
    ``log``."""
    command = [sys.executable, "-m", "stateglass.app.cli", "watch", str(cp), "--db", db]
    with open(log, "wb") as fh:
        return subprocess.Popen([*command, *flags], stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)


def stop(child: subprocess.Popen[bytes]) -> None:
    """Terminate a child process; kill it if it lingers."""
    child.terminate()
    try:
        child.wait(10)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(10)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(pid: int, seconds: float = IDLE_S) -> float:
    """Share of one core the process used over ``seconds``."""
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - start)


def runnable(pid: int) -> bool:
    """Whether a thread of the process runs or waits for a core (state R in /proc)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"R":
                    return True
        except OSError:
            continue
    return False


def quiet(pid: int, still_s: float = 0.3, within_s: float = 60.0) -> None:
    """Wait until no thread of the process has run, or waited to run, for ``still_s``: its
    scan has ended (on a loaded machine a busy thread may get no CPU time, but it is R)."""
    deadline = time.monotonic() + within_s
    last, since = cpu_seconds(pid), time.monotonic()
    while time.monotonic() - since < still_s:
        assert time.monotonic() < deadline, f"still busy after {within_s:.0f} s"
        time.sleep(0.05)
        now = cpu_seconds(pid)
        if now != last or runnable(pid):
            last, since = now, time.monotonic()


def inotify_watches(pid: int) -> int:
    """inotify watches the process holds (one ``inotify wd:`` line each in its fdinfo)."""
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
                total += sum(line.startswith("inotify wd:") for line in fh)
        except OSError:
            continue
    return total


def committed(db: str) -> set[int]:
    try:
        return {r[0] for r in read_query(db, "SELECT batch_id FROM batches WHERE committed")}
    except Exception:
        return set()  # not created yet, or the writer holds it for a moment


@pytest.mark.slow
@pytest.mark.spark
def test_watch_stays_idle_and_records_every_commit(
    spark: Any, join_conf: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, cp, db = tmp_path / "src", tmp_path / "cp", str(tmp_path / "sg.duckdb")
    for side in ("left", "right"):
        write_side(src, side, 0)
    run_join(spark, src, cp)
    dirs = sum(1 for _ in os.walk(cp))
    assert dirs > PARTITIONS * 5  # a partition directory and four store directories each
    log = tmp_path / "watch.log"
    watcher = start_watch(cp, db, log, "--debounce", "0.2")
    try:
        deadline = time.monotonic() + 120
        while b"watching" not in log.read_bytes() and time.monotonic() < deadline:
            assert watcher.poll() is None, log.read_text()
            time.sleep(0.05)
        assert committed(db) == {0}
        # The root, commits/ and offsets/: not one per store directory.
        assert inotify_watches(watcher.pid) == 3
        first_idle = idle_cpu(watcher.pid)
        for batch in (1, 2):
            for side in ("left", "right"):
                write_side(src, side, batch)
        run_join(spark, src, cp)
        while committed(db) != {0, 1, 2} and time.monotonic() < deadline + 120:
            time.sleep(0.1)
        assert committed(db) == {0, 1, 2}
        # The last scan's rows come before its health verdicts: idle begins after both.
        while not judged(db):
            assert watcher.poll() is None, log.read_text()
            assert time.monotonic() < deadline + 240, "no verdicts stored after the last scan"
            time.sleep(0.1)
        quiet(watcher.pid)  # the scan of the last commit ends
        second_idle = idle_cpu(watcher.pid)
        assert inotify_watches(watcher.pid) == 3
    finally:
        stop(watcher)
    with capsys.disabled():
        print(
            f"\nwatch on a {PARTITIONS}-partition join ({dirs} directories): idle CPU "
            f"{first_idle:.1%} after the first scan, {second_idle:.1%} after two batches"
        )
    assert first_idle < MAX_IDLE_CPU and second_idle < MAX_IDLE_CPU
    # Quiet by default: the first collect's lines, no line per batch.
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
    assert len(lines) <= 3, log.read_text()


# --- 500 or 10,000 store directories, tiled from a real join checkpoint --------------------

JOIN_SAMPLE = SAMPLES / "spark-4.3" / "join-hdfs"
REPLAYED = (10, 11)  # batches held back, then put in place while `watch` runs
STORES = 4


def hadoop_crc(data: bytes) -> bytes:
    """The ``.NAME.crc`` sidecar Hadoop's ChecksumFileSystem writes: CRC-32 per 512 bytes."""
    chunks = (data[i : i + 512] for i in range(0, len(data), 512))
    return (
        b"crc\x00"
        + struct.pack(">i", 512)
        + b"".join(struct.pack(">I", zlib.crc32(c)) for c in chunks)
    )


def rewrite(path: Path, old: bytes, new: bytes) -> None:
    """Replace ``old`` (which must be there) in a checkpoint file, and its ``.crc`` with it."""
    data = path.read_bytes()
    assert old in data, path
    data = data.replace(old, new)
    path.write_bytes(data)
    path.with_name(f".{path.name}.crc").write_bytes(hadoop_crc(data))


def batch_of(rel: str) -> int | None:
    """The batch a checkpoint file belongs to: ``offsets/N``, ``commits/N``, ``sources/S/N``
    hold batch N; a store's ``V.delta``/``V.snapshot`` (and their ``.crc``) version V = N + 1."""
    top, name = rel.split(os.sep, 1)[0], os.path.basename(rel)
    stem = name.lstrip(".").split(".")[0]
    if not stem.isdigit() or top not in ("offsets", "commits", "sources", "state"):
        return None
    return int(stem) - 1 if top == "state" else int(stem)


def judged(db: str) -> bool:
    """Whether the watcher stored health verdicts after the checkpoint's last scan."""
    return bool(
        db_rows(
            db,
            "SELECT 1 FROM health_judged j JOIN checkpoints c "
            "ON c.checkpoint = j.checkpoint AND c.last_scan = j.scan_at",
        )
    )


def tile_join(
    sample: Path, cp: Path, held: Path, partitions: int, replayed: tuple[int, ...] = REPLAYED
) -> dict[int, list[str]]:
    """Copy ``sample`` to ``cp`` with its partitions tiled out to ``partitions``, and the
    files of the batches in ``replayed`` placed under ``held`` instead (same relative paths).

    Partition P is a hard link of every file of real partition P mod 4 (the sample has 4).
    Spark writes a store's ``_metadata/schema`` only in partition 0, so only it keeps one.
    What says how many partitions there are is adjusted, and nothing else: ``numPartitions``
    in the operator metadata and ``spark.sql.shuffle.partitions`` in every ``offsets/N``
    (with their ``.crc`` recomputed). Returns each held batch's files, relative to ``cp``,
    in the order Spark writes them.
    """
    shutil.copytree(sample, cp)
    rewrite(
        cp / "state/0/_metadata/metadata",
        b'"numPartitions":4}',
        b'"numPartitions":%d}' % partitions,
    )
    for log in (cp / "offsets").iterdir():
        if log.name.isdigit():
            rewrite(
                log,
                b'"spark.sql.shuffle.partitions":"4"',
                b'"spark.sql.shuffle.partitions":"%d"' % partitions,
            )
    out: dict[int, list[str]] = {b: [] for b in replayed}

    def place(src: str, rel: str, link: bool) -> None:
        batch = batch_of(rel)
        dst = os.path.join(held if batch in out else cp, rel)
        if batch in out:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            out[batch].append(rel)
        if link:
            os.link(src, dst)
        elif dst != src:
            os.rename(src, dst)

    real = os.path.join(cp, "state", "0")
    # (real partition, store) -> the files (not ``_metadata/``) of its store directory.
    files = {
        (p, store): [e.name for e in os.scandir(os.path.join(real, str(p), store)) if e.is_file()]
        for p in range(4)
        for store in sorted(os.listdir(os.path.join(real, str(p))))
    }
    assert len(files) == 4 * STORES
    for p in range(4, partitions):
        for (src_p, store), names in files.items():
            if src_p != p % 4:
                continue
            rel_dir = os.path.join("state", "0", str(p), store)
            os.makedirs(os.path.join(cp, rel_dir))
            for name in names:
                place(
                    os.path.join(real, str(src_p), store, name), os.path.join(rel_dir, name), True
                )
    # Last, the real partitions' own files and the logs.
    for top in (
        "state/0/0",
        "state/0/1",
        "state/0/2",
        "state/0/3",
        "offsets",
        "commits",
        "sources",
    ):
        for dirpath, _, names in os.walk(cp / top):
            for name in names:
                path = os.path.join(dirpath, name)
                place(path, os.path.relpath(path, cp), False)
    # Spark's order: the source log and offsets/N, the state files, commits/N last; a
    # ``.crc`` before the file it checks, so that the commit file is the last rename.
    rank = {"sources": 0, "offsets": 1, "state": 2, "commits": 3}
    for rels in out.values():
        rels.sort(
            key=lambda r: (rank[r.split(os.sep)[0]], not os.path.basename(r).startswith("."), r)
        )
    return out


def db_rows(db: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a read query, retried while the watcher holds the database for a moment."""
    for _ in range(100):
        try:
            return read_query(db, sql)
        except Exception:
            time.sleep(0.1)
    return read_query(db, sql)


@pytest.mark.slow
@pytest.mark.parametrize(
    "partitions",
    [
        # Both sizes are measurements (first scan, replay latency), run by `make bench-tests`:
        # `make test` keeps the watcher's behaviour on a real join (the test above) and the
        # scans by name on tiled store directories (test_scan_by_name.py).
        pytest.param(125, id="500-stores", marks=pytest.mark.benchmark),
        pytest.param(2500, id="10000-stores", marks=pytest.mark.benchmark),
    ],
)
def test_watch_on_tiled_store_directories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], partitions: int
) -> None:
    """``partitions`` × 4 stores (at full size 2,500 × 4), from bytes Spark wrote.

    ``sample_checkpoints/spark-4.3/join-hdfs`` (a real PySpark stream-stream join, 4
    partitions, 12 batches, HDFS provider) tiled by :func:`tile_join`: every store directory
    of the copy holds the real delta, snapshot and ``.crc`` files of one of the 4 real
    partitions, so each tiled partition repeats a real one's state (the key sets are not
    disjoint across partitions as Spark's hash partitioning would make them; nothing in
    ``watch`` or ``collect`` checks which partition a key hashes to). Only the partition
    counts are rewritten (operator metadata, offsets; see :func:`tile_join`). Batches 10 and
    11 (versions 11 and 12 of every store, their offsets, source log entries and
    commits) are held back and renamed into place, back to back, in Spark's order while
    ``watch`` runs, as ``bench_watch.py --replay`` does: Spark would need many minutes per
    batch at this size. ``12.snapshot``, which Spark's maintenance thread may write after
    ``commits/11``, goes in before it.
    """
    cp, held, db = tmp_path / "cp", tmp_path / "held", str(tmp_path / "sg.duckdb")
    t0 = time.monotonic()
    batches = tile_join(JOIN_SAMPLE, cp, held, partitions)
    tiled_s = time.monotonic() - t0
    dirs = sum(1 for _ in os.walk(cp))
    assert dirs >= partitions * (1 + STORES)
    assert all(len(batches[b]) > partitions * STORES for b in REPLAYED)
    log = tmp_path / "watch.log"
    watcher = start_watch(cp, db, log, "--debounce", "0.2")
    try:
        t1 = time.monotonic()
        while b"watching" not in log.read_bytes():
            assert watcher.poll() is None, log.read_text()
            assert time.monotonic() - t1 < 180, "no first scan after 180 s"
            time.sleep(0.1)
        first_scan_s = time.monotonic() - t1
        assert committed(db) == set(range(REPLAYED[0]))
        assert inotify_watches(watcher.pid) == 3
        quiet(watcher.pid)
        first_idle = idle_cpu(watcher.pid, 4.0)
        # Back to back, as Spark starts the next batch once a commit is written.
        t2 = time.monotonic()
        for batch in REPLAYED:
            for rel in batches[batch]:
                os.rename(held / rel, cp / rel)
        last_commit = time.monotonic()
        while not set(REPLAYED) <= committed(db):
            assert watcher.poll() is None, log.read_text()
            assert time.monotonic() - t2 < 180, f"committed: {sorted(committed(db))}"
            time.sleep(0.1)
        replay_s, latency_s = time.monotonic() - t2, time.monotonic() - last_commit
        # After the rows, the watcher judges the checkpoint and stores the verdicts: its work
        # for this commit ends there, and idle begins.
        while not judged(db):
            assert watcher.poll() is None, log.read_text()
            assert time.monotonic() - t2 < 180, "no verdicts stored after the last scan"
            time.sleep(0.1)
        judged_s = time.monotonic() - last_commit
        quiet(watcher.pid)  # the scan's garbage is collected
        second_idle = idle_cpu(watcher.pid, 4.0)
        assert inotify_watches(watcher.pid) == 3
    finally:
        stop(watcher)
    assert committed(db) == set(range(REPLAYED[-1] + 1))
    versions = dict(
        db_rows(
            db,
            "SELECT version, count(DISTINCT (operator_id, store_name, partition_id)) "
            "FROM state_versions WHERE version > 10 GROUP BY version",
        )
    )
    assert versions == {b + 1: partitions * STORES for b in REPLAYED}
    with capsys.disabled():
        print(
            f"\nwatch on a {partitions}-partition × {STORES}-store join ({dirs:,} "
            f"directories, tiled in {tiled_s:.0f} s): first scan {first_scan_s:.1f} s, idle "
            f"CPU {first_idle:.1%}; batches {REPLAYED} recorded {replay_s:.1f} s after their "
            f"first file ({latency_s:.1f} s after the last commit, verdicts stored after "
            f"{judged_s:.1f} s), idle CPU "
            f"{second_idle:.1%} after; load {os.getloadavg()[0]:.1f}"
        )
    assert first_idle < MAX_IDLE_CPU and second_idle < MAX_IDLE_CPU
