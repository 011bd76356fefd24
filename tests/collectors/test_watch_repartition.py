"""A watcher's scans by name over Spark 4.2's repartitioned samples, batch after batch.

The samples (``sample_checkpoints/spark-4.2/repart-*``, written by real PySpark 4.2) are
replayed into a private copy as a running query writes them: the files of batches 0..2,
then each later batch's files (the repartition batch 3 among them). A watcher's scanner
(looking new commits' files up by name) must record what a scanner listing everything
records, and verify the checksums of every file it finds, the SSTs a new zip names as
well.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.db.read import read_query, reader
from stateglass.collectors.db.schema import TABLES
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.reconcile import ReconcilePolicy
from stateglass.collectors.scan.scanner import Scanner
from tests.conftest import SAMPLES, copy_until

REPARTITIONED = SAMPLES / "spark-4.2"
# When a scan ran, not what it found: differs between two scanners of the same files.
WALL_CLOCK = {"first_seen", "last_scan", "last_seen", "seen_at", "purged_at"}


def watcher(db: Database) -> Scanner:
    """A scanner by name whose full reconcile never falls due inside a test."""
    return Scanner(db, reconcile=ReconcilePolicy(every_scans=1_000, every_s=1e9))


def add_batches(src: Path, cp: Path, batches: int, tmp_path: Path) -> None:
    """What the query wrote up to (before) batch ``batches``, added to ``cp``."""
    stage = copy_until(src, tmp_path / f"stage-{batches}", batches)
    shutil.copytree(stage, cp, dirs_exist_ok=True)


def rows(db: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows but the wall-clock columns, on one read-only connection."""
    out = {}
    with reader(db) as conn:
        for table in TABLES:
            columns = [
                name
                for (name,) in conn.execute(
                    "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                    "ORDER BY column_index",
                    [table],
                ).fetchall()
                if name not in WALL_CLOCK
            ]
            got = conn.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
            out[table] = sorted(got, key=repr)
    return out


@pytest.mark.parametrize("name", ["repart-agg-up-cl", "repart-agg-down"])
def test_scans_by_name_across_the_repartition_record_what_full_scans_do(
    name: str, tmp_path: Path
) -> None:
    src = REPARTITIONED / name
    cp = copy_until(src, tmp_path / "cp", 3)
    by_name, full = Database(str(tmp_path / "a.duckdb")), Database(str(tmp_path / "b.duckdb"))
    scanner = watcher(by_name)
    for batches in (3, 4, 5):  # before the repartition, just after it, the query run on
        add_batches(src, cp, batches, tmp_path)
        scanner.scan(str(cp))
        Scanner(full).scan(str(cp))
        if batches > 3:  # the first scan by name lists everything anyway
            assert rows(by_name.path) == rows(full.path), f"after batch {batches - 1}"
    assert read_query(by_name.path, "SELECT count(*) FROM repartitions") == [(1,)]


def test_an_sst_found_by_name_is_verified_against_its_checksum(tmp_path: Path) -> None:
    src = REPARTITIONED / "repart-agg-down"  # no changelog: every batch a zip and new SSTs
    cp = copy_until(src, tmp_path / "cp", 5)
    db = Database(str(tmp_path / "db.duckdb"))
    scanner = watcher(db)
    scanner.scan(str(cp))
    before = {p for p in cp.rglob("*.sst")}
    add_batches(src, cp, 6, tmp_path)
    (sst, *_) = sorted(p for p in cp.rglob("*.sst") if p not in before)
    data = bytearray(sst.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit flipped: the size still matches its .crc
    sst.write_bytes(bytes(data))
    scanner.scan(str(cp))
    assert scanner.reconcile is not None and not scanner.reconcile.full_due(str(cp))
    problems = read_query(db.path, "SELECT path, kind FROM problems")
    assert problems == [(str(sst), "ChecksumMismatch")]
