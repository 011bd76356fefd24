"""Retention and roll-ups: ``Database.maintain`` keeps everything a page, rule or report shows.

A real checkpoint (a sample written by PySpark) is collected into a private database; the
files of its older versions are then removed from a private copy (as Spark's maintenance
does) and collected again, so the scanner marks them purged. ``maintain`` with a window of
the newest batch then rolls up what is older and compacts the purged files' rows.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from stateglass.app import queries
from stateglass.app.cli import main
from stateglass.collectors.db.history_settings import HistorySettings, from_config
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.schema_versions import SCHEMA_VERSION
from stateglass.collectors.db.writer import Database
from stateglass.collectors.errors import BadConfig
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import SAMPLES, copy_checkpoint

AGG = SAMPLES / "spark-4.3" / "agg-hdfs"
KEPT_FROM = 9  # the files of versions 1..8 are removed from the copy
TINY = HistorySettings(full_resolution_days=1e-9, rollup_versions=2, maintain_every=10**6)
STORE = (0, "default")


def _purge_below(cp: Path, version: int) -> None:
    for f in (cp / "state").rglob("*"):
        stem = f.name.split(".")[0]
        if f.is_file() and stem.isdigit() and int(stem) < version:
            f.unlink()


@pytest.fixture(scope="module")
def purged(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A collected copy of agg-hdfs whose versions below KEPT_FROM were purged since."""
    tmp = tmp_path_factory.mktemp("history")
    cp = copy_checkpoint(AGG, tmp / "agg")
    db = Database(str(tmp / "h.duckdb"), history=TINY)
    root = scan_checkpoint(db, str(cp)).checkpoint
    _purge_below(cp, KEPT_FROM)
    scan_checkpoint(db, str(cp))
    return root, db.path


def _views(db: str, root: str) -> dict[str, Any]:
    args = (db, root, *STORE)
    return {
        "totals": read_query(
            db, "SELECT * FROM store_totals WHERE checkpoint = ? ORDER BY version", [root]
        ),
        "lag": read_query(db, "SELECT * FROM snapshot_lag WHERE checkpoint = ? ORDER BY 4", [root]),
        "skew": queries.partition_skew(*args).to_dict("list"),
        "growth": queries.state_growth(*args).to_dict("list"),
        "files": queries.bytes_by_kind(*args).to_dict("list"),
        "usage": queries.disk_usage(*args).to_dict("list"),
        "history": queries.store_history(*args),
    }


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (frames' lists)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


# (columns, first, last): grids coarse enough to read bucket rows of 2 versions, and finer.
GRIDS = [(1, None, None), (3, None, None), (5, None, None), (12, None, None), (2, 3, 12),
         (2, 2, 9), (4, 4, 11), (1, 5, 5)]  # fmt: skip


def _cells_match_the_partition_rows(db: str, root: str) -> None:
    """The State page's cells from the bucket rows are the cells counted from the partition
    rows (and roll-ups) alone, column for column, on every grid."""
    buckets_read = 0
    with queries.session(db):
        for columns, first, last in GRIDS:
            got = queries.partition_cells(db, root, *STORE, first, last, columns)
            want = queries.partition_cells(
                db, root, *STORE, first, last, columns, bucket_rows=False
            )
            pd.testing.assert_frame_equal(got, want)
            assert first is not None or not got.empty
            grid = queries.cell_grid(db, root, *STORE, first, last, columns)
            buckets_read += grid.buckets[1] >= grid.buckets[0]
    assert buckets_read >= 3


def test_cells_from_bucket_rows_equal_the_partition_rows(
    purged: tuple[str, str], tmp_path: Path
) -> None:
    root, db = purged
    copy = str(tmp_path / "b.duckdb")
    shutil.copyfile(db, copy)
    # Every complete bucket of the 12 versions is counted (the scans kept them).
    assert read_query(
        copy, "SELECT width, through_version FROM bucket_marks WHERE checkpoint = ?", [root]
    ) == [(2, 12)]
    _cells_match_the_partition_rows(copy, root)
    # A narrow zoom is drawn version by version: full resolution, from the partition rows.
    zoom = queries.partition_cells(copy, root, *STORE, 9, 12)
    assert zoom["version"].drop_duplicates().tolist() == [9, 10, 11, 12]
    assert queries.cell_grid(copy, root, *STORE, 9, 12).bucket is None

    # Rows arriving late into complete buckets (forgotten, so the next scan writes them
    # again) replace those buckets' rows.
    with duckdb.connect(copy) as conn:
        conn.execute("DELETE FROM state_versions WHERE partition_id = 1 AND version IN (9, 11)")
        conn.execute(
            "UPDATE state_files SET size_bytes = size_bytes + 1 "
            "WHERE NOT purged AND partition_id = 1 AND version IN (9, 11)"
        )
    with pytest.raises(AssertionError):  # the check sees bucket rows that miss a change
        _cells_match_the_partition_rows(copy, root)
    scan_checkpoint(Database(copy, history=TINY), root)
    _cells_match_the_partition_rows(copy, root)

    # maintain rolls the old partition rows up and drops their bucket rows with them.
    Database(copy, history=TINY).maintain(root)
    assert read_query(copy, "SELECT min(bucket) FROM partition_buckets") == [
        ((KEPT_FROM - 1) // 2,)
    ]
    _cells_match_the_partition_rows(copy, root)


def test_maintain_rolls_up_and_compacts_without_losing_what_pages_show(
    purged: tuple[str, str], tmp_path: Path
) -> None:
    root, db = purged
    copy = str(tmp_path / "m.duckdb")
    shutil.copyfile(db, copy)
    before = _views(copy, root)
    partition_rows = read_query(
        copy,
        "SELECT partition_id, version, num_keys, keys_added, delta_bytes FROM state_versions "
        "WHERE checkpoint = ? ORDER BY 1, 2",
        [root],
    )
    [result] = Database(copy, history=TINY).maintain(root)

    # Everything below the first version with files on disk, in whole buckets of 2.
    assert result.full_from_version == KEPT_FROM
    assert read_query(copy, "SELECT min(version) FROM state_versions") == [(KEPT_FROM,)]
    assert result.versions_rolled_up == sum(1 for r in partition_rows if r[1] < KEPT_FROM)
    assert result.files_compacted > 0
    assert read_query(copy, "SELECT count(*) FROM state_files WHERE purged") == [(0,)]
    assert _same(_views(copy, root), before)

    # Each roll-up is the min, max and last of its partition's bucket, sums of the rest.
    rollups = read_query(
        copy,
        "SELECT partition_id, first_version, last_version, versions, min_keys, max_keys, "
        "last_keys, keys_added, delta_bytes FROM state_rollups ORDER BY 1, 2",
    )
    expected = []
    for p in sorted({r[0] for r in partition_rows}):
        rows = [r for r in partition_rows if r[0] == p and r[1] < KEPT_FROM]
        for lo in range(1, KEPT_FROM, 2):
            b = [r for r in rows if lo <= r[1] <= lo + 1]
            keys = [r[2] for r in b]
            expected.append(
                (p, b[0][1], b[-1][1], len(b), min(keys), max(keys), keys[-1],
                 sum(r[3] for r in b), sum(r[4] for r in b))
            )  # fmt: skip
    assert rollups == expected

    # The State page's cells come from the roll-ups there: the keys at each bucket's end.
    cells = queries.partition_cells(copy, root, *STORE, columns=100)
    old = cells[cells["version"] < KEPT_FROM]
    assert sorted(old["version"].unique()) == [2, 4, 6, 8]

    # A later collect does not count the rolled-up versions again, and changes nothing.
    scan_checkpoint(Database(copy, history=TINY), root)
    assert read_query(copy, "SELECT min(version) FROM state_versions") == [(KEPT_FROM,)]
    assert _same(_views(copy, root), before)


def test_a_writer_maintains_on_its_own_every_so_many_versions(
    purged: tuple[str, str], tmp_path: Path
) -> None:
    root, db = purged
    copy = str(tmp_path / "auto.duckdb")
    shutil.copyfile(db, copy)
    with duckdb.connect(copy) as conn:  # forget the versions, so the next scan writes them
        conn.execute("DELETE FROM state_versions WHERE version >= ?", [KEPT_FROM])
        conn.execute("UPDATE state_files SET size_bytes = size_bytes + 1 WHERE NOT purged")
    writer = Database(copy, history=HistorySettings(1e-9, 2, maintain_every=1))
    scan_checkpoint(writer, root)
    kept = read_query(copy, "SELECT full_from_version FROM history_maintenance")
    assert kept == [(KEPT_FROM,)]
    assert "version 9" in queries.history_kept(copy, root)


def test_an_older_database_gets_the_new_tables_filled(purged: tuple[str, str], tmp_path: Path):
    root, db = purged
    copy = str(tmp_path / "old.duckdb")
    shutil.copyfile(db, copy)
    before = _views(copy, root)
    with duckdb.connect(copy) as conn:  # what schema 3 had: no per-store tables
        for table in ("store_versions", "partition_newest", "state_rollups", "file_summaries"):
            conn.execute(f"DROP TABLE {table} CASCADE")
        conn.execute("UPDATE schema_info SET version = 3")
    Database(copy)
    assert read_query(copy, "SELECT version FROM schema_info") == [(SCHEMA_VERSION,)]
    assert _same(_views(copy, root), before)


def test_a_database_from_before_bucket_rows_reads_and_then_gets_them(
    purged: tuple[str, str], tmp_path: Path
) -> None:
    root, db = purged
    copy = str(tmp_path / "v5.duckdb")
    shutil.copyfile(db, copy)
    want = queries.partition_cells(copy, root, *STORE, columns=3, bucket_rows=False)
    with duckdb.connect(copy) as conn:  # what schema 5 had: no bucket rows
        conn.execute("DROP TABLE partition_buckets")
        conn.execute("DROP TABLE bucket_marks")
        conn.execute("UPDATE schema_info SET version = 5")
    # Read as it is (a dashboard on an older database): from the partition rows.
    assert queries.cell_grid(copy, root, *STORE, columns=3).bucket is None
    assert not queries.partition_cells(copy, root, *STORE, columns=3).empty
    # The first writer to open it fills the bucket rows of the history so far.
    Database(copy, history=TINY)
    assert read_query(copy, "SELECT version FROM schema_info") == [(SCHEMA_VERSION,)]
    pd.testing.assert_frame_equal(queries.partition_cells(copy, root, *STORE, columns=3), want)
    _cells_match_the_partition_rows(copy, root)


def test_maintain_command_says_what_it_kept(purged: tuple[str, str], tmp_path: Path, capsys):
    root, db = purged
    copy = tmp_path / "cli.duckdb"
    shutil.copyfile(db, copy)
    config = tmp_path / "sg.toml"
    config.write_text("[history]\nfull_resolution_days = 1e-9\nrollup_versions = 2\n")
    assert main(["maintain", "--db", str(copy), "--config", str(config)]) == 0
    err = capsys.readouterr().err
    assert f"{root}: full resolution from version {KEPT_FROM}" in err
    assert "one min/max/last row per 2 versions" in err


def test_history_settings_from_a_config_file() -> None:
    assert from_config({}, "x") == HistorySettings()
    got = from_config({"history": {"full_resolution_days": 3, "enabled": False}}, "x")
    assert got == HistorySettings(full_resolution_days=3.0, enabled=False)
    for bad in ({"keep": 1}, {"rollup_versions": 0}, {"rollup_versions": 1.5}, {"enabled": 1}):
        with pytest.raises(BadConfig):
            from_config({"history": bad}, "x")


def test_known_reads_history_only_from_the_oldest_live_file(tmp_path: Path) -> None:
    """A scan meets again only versions it finds files of: ``Database.known`` leaves the rows
    of versions whose files are all purged (a month of them) in the database, and the
    watermarks of their batches, but keeps whether the query ever had a watermark."""
    from datetime import datetime

    from stateglass.collectors.db.writer import _OFFSET_COLUMNS
    from stateglass.collectors.db.writes import ScanWrite

    root, now = "/cp", datetime(2026, 1, 1)
    db = Database(str(tmp_path / "sg.duckdb"), history=HistorySettings(enabled=False))

    def file(version: int) -> dict[str, Any]:
        return {
            "checkpoint": root,
            "operator_id": 0,
            "store_name": "default",
            "partition_id": 0,
            "version": version,
            "kind": "delta",
            "path": f"{root}/state/0/0/{version}.delta",
            "size_bytes": 10,
            "modified_at": 1.0,
            "purged": version < 8,
            "first_seen": now,
            "purged_at": None,
        }

    db.record_scan(
        ScanWrite(
            root=root,
            now=now,
            metadata_path=f"{root}/metadata",
            checkpoint={"checkpoint": root, "query_id": None, "first_seen": now}
            | {"last_scan": now, "pinned_conf": None},
            batch_offsets=[
                dict.fromkeys(_OFFSET_COLUMNS.split(","))
                | {"checkpoint": root, "batch_id": b, "committed": False}
                | {"watermark_ms": 5 if b == 2 else 0}
                for b in range(10)
            ],
            state_files=[file(v) for v in range(1, 11)],
            state_versions=[
                {"checkpoint": root, "operator_id": 0, "store_name": "default"}
                | {"partition_id": 0, "version": v, "num_keys": v}
                for v in range(1, 11)
            ],
        )
    )
    known = db.known(root)
    assert known.versions == {(0, "default", 0): {8, 9, 10}}
    assert known.watermarks == {2: 5, 7: 0, 8: 0, 9: 0}
    assert set(known.state_files) == {file(v)["path"] for v in (8, 9, 10)}
