"""Decompression bombs and truncated or empty files: one line, exit 2, bounded RSS and temp.

Each case damages a copy of a real PySpark-written sample checkpoint, runs the CLI in a child
process with a private TMPDIR, and measures the child's peak RSS (``wait4``) and the bytes that
appear under TMPDIR. The bounds are the ones docs/limits.md documents.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
import zstandard

from tests.damage.hostile import (
    MAX_RSS,
    MAX_TMP,
    Run,
    copy_sample,
    delta_without_snapshot,
    first_record,
    ingest_sst,
    last_batch,
    lz4_bomb,
    run_measured,
    sst_bomb,
    store_files,
    zip_bomb,
)


def assert_bounded_one_line_error(run: Run, must_name: Path, *words: str) -> None:
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert str(must_name) in lines[0], lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    assert run.peak_rss < MAX_RSS, f"peak RSS {run.peak_rss >> 20} MiB"
    assert run.peak_tmp < MAX_TMP, f"{run.peak_tmp} bytes under TMPDIR"


def _version(path: Path) -> int:
    return int(path.name.split(".")[0].split("_")[0])


def test_lz4_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    cp = copy_sample("dedup-hdfs", tmp_path)
    delta = delta_without_snapshot(cp)
    delta.write_bytes(lz4_bomb(first_record(delta)))  # ~4 MiB of valid blocks, 1 GiB inside
    assert 3 << 20 < delta.stat().st_size < 6 << 20
    run = run_measured(
        "state",
        str(cp),
        "--batch-id",
        str(_version(delta) - 1),
        "--jobs",
        "1",
        tmpdir=tmp_path / "tmp",
    )
    assert_bounded_one_line_error(run, delta, "decompression limit")


def test_lz4_bomb_within_raised_limits_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit is a setting, not a wall: raised, the same file decodes (a small bomb here)."""
    cp = copy_sample("dedup-hdfs", tmp_path)
    delta = delta_without_snapshot(cp)
    delta.write_bytes(lz4_bomb(first_record(delta), size=64 << 20))
    args = ("state", str(cp), "--batch-id", str(_version(delta) - 1), "--partition", "0")
    refused = run_measured(*args, tmpdir=tmp_path / "a")
    assert refused.returncode == 2 and "decompression limit" in refused.stderr
    monkeypatch.setenv("STATEGLASS_MAX_RATIO", "1000")
    read = run_measured(*args, tmpdir=tmp_path / "b")
    assert read.returncode == 0, read.stderr
    assert read.stdout.count("\n") >= 1


def test_zip_bomb_writes_nothing_to_tmp(tmp_path: Path) -> None:
    cp = copy_sample("agg-rocks", tmp_path)
    zip_path = store_files(cp, ".zip")[-1]
    zip_path.write_bytes(zip_bomb(zip_path))  # ~1 MiB, a 1 GiB entry
    assert zip_path.stat().st_size < 2 << 20
    run = run_measured(
        "state",
        str(cp),
        "--batch-id",
        str(_version(zip_path) - 1),
        "--jobs",
        "1",
        tmpdir=tmp_path / "tmp",
    )
    assert_bounded_one_line_error(run, zip_path, "decompression limit")


def test_bombs_do_not_blow_up_collect(tmp_path: Path) -> None:
    hdfs = copy_sample("dedup-hdfs", tmp_path)
    delta = delta_without_snapshot(hdfs)
    delta.write_bytes(lz4_bomb(first_record(delta)))
    rocks = copy_sample("agg-rocks", tmp_path)
    zip_path = store_files(rocks, ".zip")[-1]
    zip_path.write_bytes(zip_bomb(zip_path))
    db = tmp_path / "h.duckdb"
    run = run_measured("collect", str(hdfs), str(rocks), "--db", str(db), tmpdir=tmp_path / "t")
    assert run.returncode == 0, run.stderr
    assert run.peak_rss < MAX_RSS, f"peak RSS {run.peak_rss >> 20} MiB"
    assert run.peak_tmp < MAX_TMP
    with duckdb.connect(str(db), read_only=True) as conn:
        paths = {p for (p,) in conn.execute("SELECT path FROM problems").fetchall()}
    assert {str(delta), str(zip_path)} <= paths


# RocksDB tables whose blocks declare far more than the file's default budget, each written by
# RocksDB in a second or two: (blocks, bytes a block, compression).
SST_BOMBS = {
    # ~1 MiB on disk, one block of 256 MiB: what RocksDB would allocate to read it.
    "one-block": (1, 256 << 20, "lz4"),
    # ~4 MiB on disk, 1 GiB in blocks of 1 MiB.
    "many-blocks": (1024, 1 << 20, "lz4"),
}


def _sst_bomb_version(tmp_path: Path, shape: tuple[int, int, str]) -> tuple[Path, Path, int]:
    """A copy of a real RocksDB checkpoint whose newest version holds an SST bomb (ingested by
    RocksDB, so its MANIFEST names it): (checkpoint, the SST, the batch that reads it)."""
    cp = copy_sample("agg-rocks", tmp_path)
    sst = ingest_sst(cp, sst_bomb(tmp_path / "bomb.sst", *shape))
    return cp, sst, _version(store_files(cp, ".zip")[-1]) - 1


@pytest.mark.parametrize("shape", sorted(SST_BOMBS))
def test_sst_bomb_is_refused_before_rocksdb_reads_it(tmp_path: Path, shape: str) -> None:
    cp, sst, batch = _sst_bomb_version(tmp_path, SST_BOMBS[shape])
    assert sst.stat().st_size < 5 << 20
    run = run_measured(
        "state", str(cp), "--batch-id", str(batch), "--jobs", "1", tmpdir=tmp_path / "tmp"
    )
    assert_bounded_one_line_error(run, sst, "decompression limit")


def test_sst_bomb_under_a_lowered_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget is a setting: a block of 8 MiB is within the default 16 MiB floor, and
    refused once the environment lowers it."""
    cp, sst, batch = _sst_bomb_version(tmp_path, (1, 8 << 20, "zstd"))
    args = ("state", str(cp), "--batch-id", str(batch), "--jobs", "1")
    within = run_measured(*args, tmpdir=tmp_path / "a")
    assert "decompression limit" not in within.stderr
    monkeypatch.setenv("STATEGLASS_MIN_BYTES", "1MiB")
    assert_bounded_one_line_error(
        run_measured(*args, tmpdir=tmp_path / "b"), sst, "decompression limit"
    )


def test_sst_bomb_costs_report_a_section_not_memory(tmp_path: Path) -> None:
    """``report`` attributes growth from the SSTs a flush added, the bomb among them: the
    section says why it is missing, naming the SST and the limit, and the report is written."""
    cp, sst, _ = _sst_bomb_version(tmp_path, SST_BOMBS["many-blocks"])
    out = tmp_path / "report.md"
    run = run_measured(
        "report", str(cp), "-o", str(out), "--db", str(tmp_path / "h.duckdb"), tmpdir=tmp_path / "t"
    )
    assert run.returncode == 0, run.stderr
    assert run.peak_rss < MAX_RSS, f"peak RSS {run.peak_rss >> 20} MiB"
    assert run.peak_tmp < MAX_TMP
    growth = next(line for line in out.read_text().splitlines() if "growth attribution" in line)
    assert sst.name in growth and "decompression limit" in growth, growth


def test_event_log_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    """A 32 KiB zstd event log that is one frame of 1 GiB of zeros (zstd-jni frames declare no
    size): ``collect --progress`` names it and stops, the frame never decoded whole."""
    logs = tmp_path / "eventlogs"
    logs.mkdir()
    writer = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    zeros = bytes(1 << 20)
    log = logs / "local-1700000000000.zstd"
    log.write_bytes(b"".join(writer.compress(zeros) for _ in range(1024)) + writer.flush())
    assert log.stat().st_size < 64 << 10
    db = tmp_path / "h.duckdb"
    run = run_measured("collect", "--progress", str(logs), "--db", str(db), tmpdir=tmp_path / "t")
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    error = run.stderr.strip().splitlines()[-1]  # after the (empty) checkpoint summary
    assert str(log) in error and "decompression limit" in error, error
    assert run.peak_rss < MAX_RSS, f"peak RSS {run.peak_rss >> 20} MiB"


def _cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _hdfs_delta(cp: Path) -> tuple[Path, int]:
    delta = delta_without_snapshot(cp)
    return delta, _version(delta) - 1


def _hdfs_snapshot(cp: Path) -> tuple[Path, int]:
    snap = store_files(cp, ".snapshot")[-1]
    return snap, _version(snap) - 1


def _rocks_zip(cp: Path) -> tuple[Path, int]:
    z = store_files(cp, ".zip")[-1]
    return z, _version(z) - 1


def _rocks_changelog(cp: Path) -> tuple[Path, int]:
    zips = {_version(z) for z in store_files(cp, ".zip")}
    log = next(c for c in reversed(store_files(cp, ".changelog")) if _version(c) not in zips)
    return log, _version(log) - 1


def _offsets(cp: Path) -> tuple[Path, int]:
    return cp / "offsets" / str(last_batch(cp)), last_batch(cp)


def _commits(cp: Path) -> tuple[Path, int]:
    return cp / "commits" / str(last_batch(cp)), last_batch(cp)


def _schema(cp: Path) -> tuple[Path, int]:
    return cp / "state" / "0" / "0" / "_metadata" / "schema", last_batch(cp)


Pick = Callable[[Path], tuple[Path, int]]
KINDS: list[tuple[str, str, Pick]] = [
    ("delta", "agg-hdfs", _hdfs_delta),
    ("snapshot", "agg-hdfs", _hdfs_snapshot),
    ("zip", "agg-rocks", _rocks_zip),
    ("changelog", "agg-rocks-cl", _rocks_changelog),
    ("offsets", "agg-hdfs", _offsets),
    ("commits", "agg-hdfs", _commits),
    ("schema", "agg-hdfs", _schema),
]


@pytest.mark.parametrize("damage", [_cut, _empty], ids=["truncated", "empty"])
@pytest.mark.parametrize(
    ("sample", "pick"), [(s, p) for _, s, p in KINDS], ids=[k for k, _, _ in KINDS]
)
def test_damaged_file_kind(
    tmp_path: Path, sample: str, pick: Pick, damage: Callable[[Path], None]
) -> None:
    cp = copy_sample(sample, tmp_path)
    path, batch = pick(cp)
    damage(path)
    run = run_measured(
        "state", str(cp), "--batch-id", str(batch), "--jobs", "1", tmpdir=tmp_path / "tmp"
    )
    assert_bounded_one_line_error(run, path)


@pytest.mark.parametrize("damage", [_cut, _empty], ids=["truncated", "empty"])
def test_damaged_metadata(tmp_path: Path, damage: Callable[[Path], None]) -> None:
    """`state` does not need the query id; `info` shows it, so it names the bad file."""
    cp = copy_sample("agg-hdfs", tmp_path)
    damage(cp / "metadata")
    run = run_measured("info", str(cp), tmpdir=tmp_path / "tmp")
    assert_bounded_one_line_error(run, cp / "metadata")
    assert run_measured("state", str(cp), tmpdir=tmp_path / "t2").returncode == 0


def test_lz4_header_claiming_2_gb(tmp_path: Path) -> None:
    cp = copy_sample("agg-hdfs", tmp_path)
    delta = delta_without_snapshot(cp)
    data = bytearray(delta.read_bytes())
    struct.pack_into("<i", data, 13, 2_000_000_000)  # the first block's original length
    delta.write_bytes(bytes(data))
    run = run_measured(
        "state", str(cp), "--batch-id", str(_version(delta) - 1), tmpdir=tmp_path / "tmp"
    )
    assert_bounded_one_line_error(run, delta)
