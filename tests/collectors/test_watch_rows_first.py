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
import time
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.db.read import read_query
from tests.collectors.test_watch_scale import batch_of, committed, start_watch, stop
from tests.progress_queries import steady_rows, windowed

pytestmark = [pytest.mark.spark]

TIMEOUT_S = 120.0
# A long debounce: offsets/N must not start a scan of its own before commits/N, which
# releases the checkpoint at once.
WATCH_FLAGS = ("--debounce", "60", "--verbose")


def _hold_back(cp: Path, held: Path, batch: int) -> list[str]:
    """Move ``batch``'s files from ``cp`` to ``held``; their relative paths, in the order they
    go back: the state and source files, then ``offsets/N`` and ``commits/N`` (last)."""
    moved = []
    for path in sorted(p for p in cp.rglob("*") if p.is_file()):
        rel = str(path.relative_to(cp))
        if batch_of(rel) == batch:
            (held / rel).parent.mkdir(parents=True, exist_ok=True)
            path.rename(held / rel)
            moved.append(rel)
    rank = {"offsets": 1, "commits": 2}
    return sorted(moved, key=lambda r: (rank.get(r.split(os.sep)[0], 0), r))


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
    from pyspark.sql import functions as F

    # Two batches of an aggregation on HDFS state, two partitions (and the batch Spark runs
    # without data to move the watermark on): the last one is held back.
    ran = windowed(spark, tmp_path, "cp", [steady_rows(b) for b in range(2)], F.max).finish()
    cp, held, db = ran.checkpoint, tmp_path / "held", str(tmp_path / "sg.duckdb")
    last = max(int(p.name) for p in (cp / "commits").iterdir() if p.name.isdigit())
    files = _hold_back(cp, held, last)
    delta = next(r for r in files if r.endswith(f"{last + 1}.delta"))
    sidecar = os.path.join(os.path.dirname(delta), f".{os.path.basename(delta)}.crc")
    assert sidecar in files, files
    log = tmp_path / "watch.log"
    watcher = start_watch(cp, db, log, *WATCH_FLAGS)
    fifo = cp / sidecar
    writer: int | None = None
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while b"watching" not in log.read_bytes():
            assert watcher.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "no first scan"
            time.sleep(0.05)
        assert committed(db) == set(range(last))
        # The batch's files, offsets/N and commits/N last; one checksum file a FIFO.
        os.mkfifo(fifo)
        for rel in files:
            if rel != sidecar:
                os.rename(held / rel, cp / rel)
        writer = _open_writer_end(fifo, watcher, log)
        # The watcher is inside the commit's checksum checks, blocked reading the FIFO.
        assert committed(db) == set(range(last + 1)), "the rows wait for the checksum checks"
        versions = read_query(db, "SELECT DISTINCT version FROM state_versions")
        assert (last + 1,) in versions
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
        stop(watcher)
