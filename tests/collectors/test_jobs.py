"""``collect --jobs N``: chains in forked workers, the very tables of ``--jobs 1``.

The collects run as ``stateglass`` processes: a fork copies only the forking thread, so the
engine keeps chains in-process when other threads run, as they may in a pytest process.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.collectors.helpers import SAMPLES, all_tables, copy_sample
from tests.conftest import ROOT


def _start(paths: list[str], db: Path, jobs: str) -> subprocess.Popen[str]:
    """``stateglass collect PATHS --db DB --jobs JOBS``, started."""
    args = ["collect", *paths, "--db", str(db), "--jobs", jobs]
    return subprocess.Popen(
        [sys.executable, "-m", "stateglass.app.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _stderr(proc: subprocess.Popen[str]) -> str:
    """The finished collect's stderr; it must have succeeded."""
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:  # timed out, or this test failed before it ended
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    return err


def collect(paths: list[str], db: Path, jobs: str) -> str:
    """``stateglass collect PATHS --jobs JOBS``; its stderr."""
    return _stderr(_start(paths, db, jobs))


def assert_same_tables(paths: list[str], tmp_path: Path) -> None:
    # The two collects read the same files into their own databases: run side by side, they
    # take the time of the slower one.
    serial_run = _start(paths, tmp_path / "jobs1.duckdb", "1")
    forked_run = _start(paths, tmp_path / "jobs2.duckdb", "2")
    try:
        serial = _stderr(serial_run)
    finally:
        forked = _stderr(forked_run)
    assert "worker processes" not in serial
    assert "(partitions counted in 2 worker processes)" in forked
    one, two = (
        all_tables(str(tmp_path / "jobs1.duckdb")),
        all_tables(str(tmp_path / "jobs2.duckdb")),
    )
    assert one.keys() == two.keys()
    for name in one:
        assert two[name] == one[name], name
    assert one["state_versions"] and one["state_files"]


@pytest.mark.slow
def test_samples_identical_to_jobs_1(tmp_path: Path) -> None:
    assert_same_tables([str(SAMPLES)], tmp_path)


# The whole corpus (71 checkpoints) twice: a scale case of the samples' parity above, which
# `make test` runs; `make bench-tests` runs this one.
@pytest.mark.benchmark
def test_corpus_identical_to_jobs_1(fixture_corpus: Path, tmp_path: Path) -> None:
    assert_same_tables([str(fixture_corpus)], tmp_path)


def test_incremental_collect_identical(tmp_path: Path) -> None:
    """A second collect after more batches counts only the new versions, from the middle of
    each chain, in workers; every table equals a serial run's."""
    from tests.collectors.test_engines import _hide_after

    def collect_twice(jobs: str) -> dict[str, list[tuple[object, ...]]]:
        where = tmp_path / f"jobs{jobs}"
        cps = [copy_sample(name, where) for name in ("spark-4.3/agg-hdfs", "spark-4.3/join-hdfs")]
        moves = [m for cp in cps for m in _hide_after(cp, 5, where / "aside" / cp.name)]
        db = where / "db.duckdb"
        collect([str(cp) for cp in cps], db, jobs)
        for src, dst in moves:
            src.replace(dst)
        second = collect([str(cp) for cp in cps], db, jobs)
        assert ("(partitions counted in 2 worker processes)" in second) == (jobs == "2")
        return all_tables(str(db), str(where))

    # Each runs on its own copies and database: side by side, as the collects above.
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(collect_twice, ("1", "2")))
    assert got[0] == got[1]
    assert got[0]["state_versions"]
