"""A database last opened by an older writer gets the partial-history views on a read-only
connection."""

from __future__ import annotations

from pathlib import Path

import duckdb

from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import SAMPLES

AGG = SAMPLES / "spark-4.3" / "agg-hdfs"


def test_old_views_are_shadowed_by_the_complete_version_ones(tmp_path: Path) -> None:
    db = str(tmp_path / "old.duckdb")
    scan_checkpoint(Database(db), str(AGG))
    # What an older StateGlass left: no store_totals, a state_growth of its own.
    with duckdb.connect(db) as conn:
        conn.execute("DROP VIEW state_growth; DROP VIEW partition_skew; DROP VIEW store_totals")
        conn.execute("CREATE VIEW state_growth AS SELECT 1 AS old")
    assert read_query(db, "SELECT count(*), count(num_keys) FROM state_growth") == [(12, 12)]
    assert read_query(db, "SELECT count(*) FROM partition_skew WHERE skew > 0") == [(12,)]
    assert read_query(db, "SELECT bool_and(complete) FROM store_totals") == [(True,)]


def test_a_database_without_the_repartitions_view_gets_it(tmp_path: Path) -> None:
    """Written before the repartitions view: a reader makes it, and the views that use
    per-version partition counts, as temporary views."""
    db = str(tmp_path / "older.duckdb")
    scan_checkpoint(Database(db), str(AGG))
    with duckdb.connect(db) as conn:
        conn.execute("DROP VIEW repartitions")
    assert read_query(db, "SELECT count(*) FROM repartitions") == [(0,)]
    assert read_query(db, "SELECT bool_and(complete) FROM store_totals") == [(True,)]
