"""Scanning checkpoints into DuckDB: incremental, tolerant of bad files, never writing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stateglass.app.cli import main as cli_main
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource, iter_raw_state
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.collectors.helpers import (
    SAMPLES,
    CountingFileSystem,
    copy_sample,
    sample_id,
    sample_paths,
    tree_digest,
)

AGG_HDFS = "spark-4.3/agg-hdfs"
# Files a scan may read just to learn the layout: operator metadata and schemas.
LAYOUT = ("/_metadata/", "/_stateSchema/", "/metadata")


def _data_reads(fs: CountingFileSystem) -> set[str]:
    return {p for p in fs.reads if not any(part in p for part in LAYOUT)}


@pytest.mark.parametrize("path", [pytest.param(p, id=sample_id(p)) for p in sample_paths()])
def test_num_keys_equals_our_reader_at_every_version(samples_db: str, path: str) -> None:
    """Set-semantics replay of deltas/changelogs == the key count of a full rebuild."""
    cp = Checkpoint.open(path)
    rows = read_query(
        samples_db,
        "SELECT operator_id, store_name, partition_id, version, num_keys FROM state_versions "
        "WHERE checkpoint = ?",
        [cp.root],
    )
    assert rows
    counted = {(o, s, p, v): n for o, s, p, v, n in rows}
    for store in cp.stores():
        source = StateSource(cp, StateRequest(store.operator_id, store.store_name))
        for partition in store.partitions:
            reader = source.reader(partition)
            for version in reader.versions():
                expected = sum(1 for _ in reader.load(version))
                key = (store.operator_id, store.store_name, partition, version)
                assert counted.get(key) == expected, key


def test_batches_and_operators_recorded(samples_db: str) -> None:
    path = str(SAMPLES / AGG_HDFS)
    cp = Checkpoint.open(path)
    batches = read_query(
        samples_db,
        "SELECT batch_id, committed, batch_timestamp_ms, watermark_ms, codec, provider "
        "FROM batches WHERE checkpoint = ? ORDER BY batch_id",
        [cp.root],
    )
    assert [b[0] for b in batches] == cp.offset_batch_ids
    assert all(b[1] for b in batches)
    assert batches[3][2] == cp.offsets(3).batch_timestamp_ms
    assert batches[0][4:] == ("lz4", "hdfs")
    ops = read_query(samples_db, "SELECT * FROM operators WHERE checkpoint = ?", [cp.root])
    assert [(o[1], o[2], o[3], o[4]) for o in ops] == [(0, "stateStoreSave", "default", 4)]
    for view in (
        "batch_lag",
        "batch_durations",
        "trigger_intervals",
        "watermark_delays",
        "snapshot_lag",
        "partition_skew",
        "state_growth",
    ):
        assert read_query(samples_db, f"SELECT count(*) FROM {view}")[0][0] > 0, view


def test_last_version_matches_spark_readme_row_count(samples_db: str) -> None:
    """sample_checkpoints/README.md: 14 rows at the last batch of agg-hdfs."""
    root = str(SAMPLES / AGG_HDFS)
    total = read_query(
        samples_db,
        "SELECT sum(num_keys) FROM state_versions WHERE checkpoint = ? AND version = 12",
        [root],
    )
    assert total == [(14,)]


def _hide_last_batch(cp_dir: Path, holding: Path) -> list[tuple[Path, Path]]:
    """Move the files of the last batch (offsets/commits 11, state version 12) aside."""
    moved = []
    for rel in ("offsets/11", "commits/11", "offsets/.11.crc", "commits/.11.crc"):
        if (cp_dir / rel).exists():
            moved.append((cp_dir / rel, holding / rel.replace("/", "_")))
    for part in (cp_dir / "state" / "0").iterdir():
        if part.name.isdigit():
            for f in part.iterdir():
                if f.name.startswith(("12.", ".12.")):
                    moved.append((f, holding / f"{part.name}_{f.name}"))
    for src, dst in moved:
        shutil.move(src, dst)
    return moved


def test_incremental_recollect_reads_only_what_changed(tmp_path: Path) -> None:
    cp_dir = copy_sample(AGG_HDFS, tmp_path)
    holding = tmp_path / "held"
    holding.mkdir()
    moved = _hide_last_batch(cp_dir, holding)
    db = Database(str(tmp_path / "db.duckdb"))

    first = scan_checkpoint(db, str(cp_dir))
    assert first.versions == 4 * 11

    for src, dst in moved:
        shutil.move(dst, src)
    fs = CountingFileSystem()
    second = scan_checkpoint(db, str(cp_dir), fs=fs)
    assert second.versions == 4  # version 12 of each partition, nothing else
    reads = _data_reads(fs)
    logs = {p for p in reads if "/state/" not in p}
    assert logs == {str(cp_dir / "offsets" / "11"), str(cp_dir / "commits" / "11")}
    for p in reads - logs:
        # Version 12, and what rebuilding version 11 needs: snapshot 9, deltas 10 and 11.
        assert os.path.basename(p) in {
            "12.delta",
            "12.snapshot",
            "9.snapshot",
            "10.delta",
            "11.delta",
        }, p

    fs = CountingFileSystem()
    third = scan_checkpoint(db, str(cp_dir), fs=fs)
    assert (third.versions, third.files_added, third.batches) == (0, 0, 0)
    # Only the newest offsets file is read again, for the query's pinned conf.
    assert _data_reads(fs) <= {str(cp_dir / "offsets" / "11")}
    # Known state files are not stat-ed again, but for each directory's newest version
    # (a retried batch may rewrite it).
    state_stats = [p for p in fs.stats if not any(part in p for part in LAYOUT)]
    assert {os.path.basename(p) for p in state_stats} <= {"12.delta", "12.snapshot"}
    assert len(state_stats) >= 4


def test_rewritten_newest_version_is_seen(tmp_path: Path) -> None:
    cp_dir = copy_sample(AGG_HDFS, tmp_path)
    db = Database(str(tmp_path / "db.duckdb"))
    scan_checkpoint(db, str(cp_dir))
    newest = cp_dir / "state" / "0" / "0" / "12.delta"
    older = cp_dir / "state" / "0" / "0" / "11.delta"
    # A retried batch rewrote version 12 (here: the bytes of 11, so the size changes).
    shutil.copy(older, newest)
    again = scan_checkpoint(db, str(cp_dir))
    assert again.files_changed == 1
    (size,) = read_query(
        str(tmp_path / "db.duckdb"),
        "SELECT size_bytes FROM state_files WHERE path = ?",
        [str(newest)],
    )[0]
    assert size == older.stat().st_size


def test_purged_files_are_marked_not_deleted(tmp_path: Path) -> None:
    cp_dir = copy_sample(AGG_HDFS, tmp_path)
    db = Database(str(tmp_path / "db.duckdb"))
    scan_checkpoint(db, str(cp_dir))
    gone = cp_dir / "state" / "0" / "2" / "1.delta"
    gone.unlink()
    summary = scan_checkpoint(db, str(cp_dir))
    assert summary.files_purged == 1
    rows = read_query(
        db.path, "SELECT purged, purged_at IS NOT NULL FROM state_files WHERE path = ?", [str(gone)]
    )
    assert rows == [(True, True)]
    kept = read_query(
        db.path,
        "SELECT count(*) FROM state_versions WHERE partition_id = 2 AND version = 1",
    )
    assert kept == [(1,)]


def test_truncated_delta_is_a_problem_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp_dir = copy_sample(AGG_HDFS, tmp_path)
    bad = cp_dir / "state" / "0" / "1" / "5.delta"
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    db_path = str(tmp_path / "db.duckdb")

    assert cli_main(["collect", str(cp_dir), "--db", db_path]) == 0
    assert "1 problems" in capsys.readouterr().err

    problems = read_query(db_path, "SELECT path, kind, message FROM problems ORDER BY kind")
    # The decoder trips on it, and its Hadoop sidecar no longer matches (the sizes differ).
    assert [(p[0], p[1]) for p in problems] == [
        (str(bad), "ChecksumMismatch"),
        (str(bad), "CorruptFile"),
    ]
    per_partition = dict(
        read_query(
            db_path,
            "SELECT partition_id, list(version ORDER BY version) FROM state_versions "
            "GROUP BY partition_id",
        )
    )
    for partition in (0, 2, 3):
        assert per_partition[partition] == list(range(1, 13))
    # Partition 1 loses only version 5: version 6 has its own snapshot.
    assert per_partition[1] == [v for v in range(1, 13) if v != 5]

    # A rescan with nothing changed keeps the problem; a repaired file clears it.
    assert cli_main(["collect", str(cp_dir), "--db", db_path]) == 0
    assert len(read_query(db_path, "SELECT DISTINCT path FROM problems")) == 1
    bad.write_bytes(data)
    assert cli_main(["collect", str(cp_dir), "--db", db_path]) == 0
    assert read_query(db_path, "SELECT path FROM problems") == []
    versions = read_query(db_path, "SELECT version FROM state_versions WHERE partition_id = 1")
    assert sorted(v for (v,) in versions) == list(range(1, 13))


def test_not_a_checkpoint_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli_main(["collect", str(tmp_path), "--db", str(tmp_path / "db.duckdb")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and "not a Structured Streaming checkpoint" in err
    assert not (tmp_path / "db.duckdb").exists()


@pytest.mark.parametrize("command", ["collect", "watch"])
def test_a_database_inside_the_checkpoint_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    cp_dir = copy_sample(AGG_HDFS, tmp_path)
    before = tree_digest(cp_dir)
    status = cli_main([command, str(cp_dir), "--db", str(cp_dir / "state" / "sg.duckdb")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and "inside the checkpoint" in err
    assert tree_digest(cp_dir) == before


def test_collecting_never_changes_a_byte(tmp_path: Path) -> None:
    before = tree_digest(SAMPLES)
    db = Database(str(tmp_path / "db.duckdb"))
    for path in sample_paths():
        scan_checkpoint(db, path)
    assert tree_digest(SAMPLES) == before


def test_state_rows_unchanged_by_collect(samples_db: str) -> None:
    """Sanity: the database agrees with a direct read of the last batch."""
    path = str(SAMPLES / "spark-4.3/agg-rocks-cl")
    cp = Checkpoint.open(path)
    source = StateSource(cp, StateRequest())
    direct = sum(1 for _ in iter_raw_state(source, None))
    last = cp.last_committed_batch
    assert last is not None
    db_total = read_query(
        samples_db,
        "SELECT sum(num_keys) FROM state_versions WHERE checkpoint = ? AND version = ?",
        [cp.root, last + 1],
    )
    assert db_total == [(direct,)]


READER = textwrap.dedent(
    """
    import os, sys, time
    from stateglass.collectors.db.read import read_query
    db, stop = sys.argv[1], sys.argv[2]
    ok = 0
    while not os.path.exists(stop):
        read_query(db, "SELECT count(*) FROM state_versions", timeout_s=30)
        read_query(db, "SELECT * FROM state_growth", timeout_s=30)
        ok += 1
        if ok == 1:  # the writer starts once the reader is reading
            open(stop + ".reading", "w").close()
    print(ok)
    """
)


def test_dashboard_reads_while_the_writer_writes(tmp_path: Path) -> None:
    """A reader process polls the database while this process collects: neither fails."""
    db = Database(str(tmp_path / "db.duckdb"))
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, db.path, str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "stop.reading").exists():
            assert reader.poll() is None, reader.communicate()[1]
            assert time.monotonic() < deadline, "the reader never read"
            time.sleep(0.05)
        for path in sample_paths():
            scan_checkpoint(db, path)
        # Scan copies (new checkpoints to the database) to write more while the reader reads.
        for path in sample_paths()[:4]:
            copy = tmp_path / "copies" / sample_id(path).replace("/", "-")
            shutil.copytree(path, copy, symlinks=True)
            scan_checkpoint(db, str(copy))
    finally:
        stop.touch()
        out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert int(out.strip()) > 0
    assert read_query(db.path, "SELECT count(*) FROM state_versions")[0][0] > 0
