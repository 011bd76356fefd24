"""``stateglass watch`` itself writes a commit's rows before it checks the new files' checksums.

The benchmarks measured commit-to-row with a watcher's scanner that checks checksums after
writing the rows (``collectors/scan/late_checks.py``); this runs the real CLI, as a user
does, on a checkpoint a real PySpark query wrote, and catches its scan in the middle: one new
delta's Hadoop checksum file is a FIFO, so the scan's checksum check blocks in ``open()``
until the test opens the other end. While it is blocked there, the commit's rows must already
be readable. A watcher that checks before writing (as ``collect`` does) blocks before its
write, and the rows are not there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.db.database import read_query
from tests.collectors.test_watch_scale import batch_of
from tests.conftest import ROOT, spark_conf, write_batch_files

pytestmark = [pytest.mark.spark]

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
HELD = 1  # the batch put in place while the watcher runs
TIMEOUT_S = 120.0
# A long debounce: offsets/N must not start a scan of its own before commits/N, which
# releases the checkpoint at once.
WATCH_FLAGS = ("--debounce", "60", "--verbose")


def _run_query(spark: Any, base: Path) -> Path:
    """Two batches of a streaming count by key (HDFS provider, 2 partitions): batch 0 and 1."""
    src = write_batch_files(
        base / "src", [[{"k": f"key-{i % 7}", "n": n} for i in range(20)] for n in range(2)]
    )
    settings = {"spark.sql.streaming.stateStore.providerClass": HDFS}
    with spark_conf(spark, settings):
        query = (
            spark.readStream.schema("k STRING, n INT")
            .option("maxFilesPerTrigger", 1)
            .json(str(src))
            .groupBy("k")
            .count()
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(base / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return base / "cp"


def _hold_back(cp: Path, held: Path, batch: int) -> list[str]:
    """Move ``batch``'s files (relative paths) from ``cp`` to ``held``; in Spark's order of
    writing, the logs last: ``offsets/N`` then ``commits/N``."""
    moved = []
    for path in sorted(p for p in cp.rglob("*") if p.is_file()):
        rel = str(path.relative_to(cp))
        if batch_of(rel) == batch:
            (held / rel).parent.mkdir(parents=True, exist_ok=True)
            path.rename(held / rel)
            moved.append(rel)
    rank = {"offsets": 1, "commits": 2}
    return sorted(moved, key=lambda r: (rank.get(r.split(os.sep)[0], 0), r))


def _committed(db: str) -> set[int]:
    try:
        return {r[0] for r in read_query(db, "SELECT batch_id FROM batches WHERE committed")}
    except Exception:
        return set()  # not created yet, or the writer holds it for a moment


def _problems(db: str, rel: str) -> list[str]:
    """Kinds of the problem rows of the checkpoint file at ``rel``."""
    rows = read_query(db, "SELECT path, kind FROM problems")
    return [kind for path, kind in rows if path.endswith(os.sep + rel)]


def _open_writer_end(fifo: Path, watcher: subprocess.Popen[bytes], log: Path) -> int:
    """The FIFO's write end, once the watcher has opened its read end (its checksum check
    reads the file): until then, a non-blocking open fails with ENXIO."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
        assert watcher.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"the watcher never read {fifo}: {log.read_text()}"
        time.sleep(0.05)


def _release(fifo: Path) -> None:
    """Let a watcher blocked on the FIFO go on (an empty checksum file: nothing judged)."""
    with contextlib.suppress(OSError):  # nobody reads it
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def test_watch_writes_a_commits_rows_before_checking_its_checksums(
    spark: Any, tmp_path: Path
) -> None:
    cp = _run_query(spark, tmp_path)
    held, db = tmp_path / "held", str(tmp_path / "sg.duckdb")
    files = _hold_back(cp, held, HELD)
    delta = next(r for r in files if r.endswith(f"{HELD + 1}.delta"))
    sidecar = os.path.join(os.path.dirname(delta), f".{os.path.basename(delta)}.crc")
    assert sidecar in files, files
    log = tmp_path / "watch.log"
    with open(log, "wb") as fh:
        watcher = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "stateglass.app.cli",
                "watch",
                str(cp),
                "--db",
                db,
                *WATCH_FLAGS,
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    fifo = cp / sidecar
    writer: int | None = None
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while b"watching" not in log.read_bytes():
            assert watcher.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "no first scan"
            time.sleep(0.05)
        assert _committed(db) == {HELD - 1}
        # The batch's files as Spark writes them, commits/N last; one checksum file a FIFO.
        os.mkfifo(fifo)
        for rel in files:
            if rel != sidecar:
                os.rename(held / rel, cp / rel)
        writer = _open_writer_end(fifo, watcher, log)
        # The watcher is inside the commit's checksum checks, blocked reading the FIFO.
        assert _committed(db) == {HELD - 1, HELD}, "the rows wait for the checksum checks"
        versions = read_query(db, "SELECT DISTINCT version FROM state_versions")
        assert (HELD + 1,) in versions
        # Spark's checksum file with one CRC flipped: the check that was waiting reports it.
        real = (held / sidecar).read_bytes()
        os.write(writer, real[:-1] + bytes([real[-1] ^ 0xFF]))
        os.close(writer)
        writer = None
        deadline = time.monotonic() + TIMEOUT_S
        while not (found := _problems(db, delta)):
            assert watcher.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no problem row for {delta}: {log.read_text()}"
            time.sleep(0.05)
        assert found == ["ChecksumMismatch"]
    finally:
        if writer is not None:
            os.close(writer)
        _release(fifo)
        watcher.terminate()
        try:
            watcher.wait(10)
        except subprocess.TimeoutExpired:
            watcher.kill()
            watcher.wait(10)
