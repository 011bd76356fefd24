"""``collect --jobs N``: chains in forked workers, the very tables of ``--jobs 1``.

The collects run as ``stateglass`` processes: a fork copies only the forking thread, so the
engine keeps chains in-process when other threads run, as they may in a pytest process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.collectors.helpers import SAMPLES, all_tables, copy_sample
from tests.conftest import ROOT


def collect(paths: list[str], db: Path, jobs: str) -> str:
    """``stateglass collect PATHS --jobs JOBS``; its stderr."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stateglass.app.cli",
            "collect",
            *paths,
            "--db",
            str(db),
            "--jobs",
            jobs,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def assert_same_tables(paths: list[str], tmp_path: Path) -> None:
    serial = collect(paths, tmp_path / "jobs1.duckdb", "1")
    forked = collect(paths, tmp_path / "jobs2.duckdb", "2")
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


def test_samples_identical_to_jobs_1(tmp_path: Path) -> None:
    assert_same_tables([str(SAMPLES)], tmp_path)


@pytest.mark.slow
def test_corpus_identical_to_jobs_1(fixture_corpus: Path, tmp_path: Path) -> None:
    assert_same_tables([str(fixture_corpus)], tmp_path)


def test_incremental_collect_identical(tmp_path: Path) -> None:
    """A second collect after more batches counts only the new versions, from the middle of
    each chain, in workers; every table equals a serial run's."""
    from tests.collectors.test_engines import _hide_after

    got = []
    for jobs in ("1", "2"):
        where = tmp_path / f"jobs{jobs}"
        cps = [copy_sample(name, where) for name in ("spark-4.3/agg-hdfs", "spark-4.3/join-hdfs")]
        moves = [m for cp in cps for m in _hide_after(cp, 5, where / "aside" / cp.name)]
        db = where / "db.duckdb"
        collect([str(cp) for cp in cps], db, jobs)
        for src, dst in moves:
            src.replace(dst)
        second = collect([str(cp) for cp in cps], db, jobs)
        assert ("(partitions counted in 2 worker processes)" in second) == (jobs == "2")
        got.append(all_tables(str(db), str(where)))
    assert got[0] == got[1]
    assert got[0]["state_versions"]
