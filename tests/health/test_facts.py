"""The facts a scan records for the health rules, and the upgrade of an older database."""

from __future__ import annotations

from pathlib import Path

import duckdb

from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.schema_versions import SCHEMA_VERSION
from stateglass.collectors.db.writer import Database
from tests.health.conftest import SAMPLES, collect, judge, statuses

ROCKS = SAMPLES / "spark-4.3" / "agg-rocks"


def _count(db: Path, sql: str) -> int:
    value: int = read_query(str(db), sql)[0][0]
    return value


def test_zip_references_are_recorded(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    collect(db, ROCKS)
    zips = _count(db, "SELECT count(*) FROM state_files WHERE kind = 'zip'")
    recorded = _count(db, "SELECT count(*) FROM state_versions WHERE sst_files_live IS NOT NULL")
    assert zips == recorded == 48
    # Every SST on disk is referenced by some zip of the sample.
    ssts = _count(db, "SELECT count(*) FROM state_files WHERE kind = 'sst'")
    assert _count(db, "SELECT count(*) FROM sst_refs") == ssts == 38
    assert _count(db, "SELECT count(*) FROM schema_files") == 1
    assert read_query(str(db), "SELECT pinned_conf LIKE '%shuffle.partitions%' FROM checkpoints")[
        0
    ] == (True,)


def test_an_older_database_is_upgraded_and_its_zips_read_again(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    root = collect(db, ROCKS)
    versions = _count(db, "SELECT count(*) FROM state_versions")
    # Make it look like schema version 1: no reference facts.
    with duckdb.connect(str(db)) as conn:
        for table in ("sst_refs", "temp_files", "schema_files", "variable_rows"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("ALTER TABLE checkpoints DROP COLUMN pinned_conf")
        conn.execute("ALTER TABLE checkpoints DROP COLUMN rewritten_at_batch")
        conn.execute("ALTER TABLE state_versions DROP COLUMN sst_files_live")
        conn.execute("ALTER TABLE health_judged DROP COLUMN clock_facts")
        conn.execute("UPDATE schema_info SET version = 1")
    Database(str(db))  # opening upgrades it
    assert _count(db, "SELECT max(version) FROM schema_info") == SCHEMA_VERSION == 9
    assert _count(db, "SELECT count(*) FROM health_judged WHERE clock_facts IS NULL") == 0
    assert _count(db, "SELECT count(*) FROM state_files WHERE kind = 'zip'") == 0
    # Until the next scan the orphan check skips partitions whose references are unknown.
    assert statuses(judge(db, root), "orphans") == {"OK"}
    collect(db, ROCKS)
    assert _count(db, "SELECT count(*) FROM state_versions") == versions
    assert _count(db, "SELECT count(*) FROM state_versions WHERE sst_files_live IS NULL") == 0
    assert _count(db, "SELECT count(*) FROM sst_refs") == 38
    assert statuses(judge(db, root), "orphans") == {"OK"}
