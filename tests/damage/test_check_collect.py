"""`check` and `collect` tell the truth about damage.

Every case damages a copy of a real sample checkpoint. `check` is judged just after the
copy's last commit (``--now``), so no other rule is WARN: the exit status is the damage's.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from tests.damage.hostile import (
    ROOT,
    after_last_commit,
    copy_sample,
    delta_without_snapshot,
    last_batch,
    store_files,
)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stateglass.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )


def check(cp: Path, db: Path) -> tuple[int, list[dict[str, str]]]:
    proc = cli("check", str(cp), "--db", str(db), "--json", "--now", after_last_commit(cp))
    assert proc.stderr.count("\n") <= 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)["findings"]


def _version(path: Path) -> int:
    return int(path.name.split(".")[0].split("_")[0])


def _empty_delta(cp: Path) -> Path:
    path = delta_without_snapshot(cp)
    path.write_bytes(b"")
    return path


def _lz4_claims_2_gb(cp: Path) -> Path:
    path = delta_without_snapshot(cp)
    data = bytearray(path.read_bytes())
    struct.pack_into("<i", data, 13, 2_000_000_000)
    path.write_bytes(bytes(data))
    return path


def _offsets_v99(cp: Path) -> Path:
    path = cp / "offsets" / str(last_batch(cp))
    path.write_bytes(path.read_bytes().replace(b"v1", b"v99", 1))
    return path


def _empty_offsets(cp: Path) -> Path:
    path = cp / "offsets" / str(last_batch(cp))
    path.write_bytes(b"")
    return path


def _bad_metadata(cp: Path) -> Path:
    path = cp / "metadata"
    path.write_text('{"id": ')
    return path


def _empty_snapshot(cp: Path) -> Path:
    path = store_files(cp, ".snapshot")[-1]
    path.write_bytes(b"")
    return path


def _empty_zip(cp: Path) -> Path:
    path = store_files(cp, ".zip")[-1]
    path.write_bytes(b"")
    return path


def _empty_changelog(cp: Path) -> Path:
    path = store_files(cp, ".changelog")[-1]
    path.write_bytes(b"")
    return path


def _empty_commit(cp: Path) -> Path:
    path = cp / "commits" / str(last_batch(cp))
    path.write_bytes(b"")
    return path


def _empty_schema(cp: Path) -> Path:
    path = cp / "state" / "0" / "0" / "_metadata" / "schema"
    path.write_bytes(b"")
    return path


def _empty_op_meta(cp: Path) -> Path:
    path = cp / "state" / "0" / "_metadata" / "metadata"
    path.write_bytes(b"")
    return path


Damage = Callable[[Path], Path]
# (damage, sample, worst damaged_files status). A bad delta or changelog of version 12 is a
# WARN: every sample has a snapshot or zip at version 12, which the next batch loads. So is a
# bad HDFS snapshot: Spark 4.1+'s automatic snapshot repair loads an older one plus the deltas
# (RocksDB without changelogs cannot: its empty zip stays an ERR).
CASES: list[tuple[str, Damage, str, str]] = [
    ("empty-delta", _empty_delta, "agg-hdfs", "WARN"),
    ("lz4-header-2gb", _lz4_claims_2_gb, "agg-hdfs", "WARN"),
    ("offsets-v99", _offsets_v99, "agg-hdfs", "ERR"),
    ("bad-metadata", _bad_metadata, "agg-hdfs", "ERR"),
    ("empty-snapshot", _empty_snapshot, "agg-hdfs", "WARN"),
    ("empty-zip", _empty_zip, "agg-rocks", "ERR"),
    ("empty-changelog", _empty_changelog, "agg-rocks-cl", "WARN"),
    ("empty-commit", _empty_commit, "agg-hdfs", "ERR"),
    ("empty-schema", _empty_schema, "agg-hdfs", "ERR"),
]


@pytest.mark.parametrize(
    ("damage", "sample", "status"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_check_is_not_ok_over_damage(
    tmp_path: Path, damage: Damage, sample: str, status: str
) -> None:
    cp = copy_sample(sample, tmp_path)
    bad = damage(cp)
    code, findings = check(cp, tmp_path / "h.duckdb")
    damaged = [f for f in findings if f["rule"] == "damaged_files"]
    assert [f["status"] for f in damaged] == [status], damaged
    assert str(bad.relative_to(cp)) in damaged[0]["finding"]
    assert code == {"WARN": 1, "ERR": 2}[status]


def test_healthy_copy_is_ok(tmp_path: Path) -> None:
    """The same judgement on an undamaged copy: exit 0, so the cases above measure damage."""
    cp = copy_sample("agg-hdfs", tmp_path)
    code, findings = check(cp, tmp_path / "h.duckdb")
    assert code == 0, [f for f in findings if f["status"] != "OK"]
    assert any(f["rule"] == "damaged_files" and f["status"] == "OK" for f in findings)


def test_readable_claims_are_what_can_be_read(tmp_path: Path) -> None:
    cp = copy_sample("agg-hdfs", tmp_path)
    delta = _empty_delta(cp)
    broken_batch = _version(delta) - 1
    _, findings = check(cp, tmp_path / "h.duckdb")
    retention = next(f for f in findings if f["rule"] == "retention")
    claimed = retention["finding"].split("readable: batches ", 1)[1].split(" (", 1)[0]
    # Every claimed batch reads; the broken one is not claimed and does not read.
    assert claimed == f"0..{broken_batch - 1}, {broken_batch + 1}"
    assert cli("state", str(cp), "--batch-id", str(broken_batch)).returncode == 2
    for batch in (0, broken_batch - 1, broken_batch + 1):
        assert cli("state", str(cp), "--batch-id", str(batch)).returncode == 0


def _versions(db: Path) -> set[tuple[int, str, int, int, int]]:
    with duckdb.connect(str(db), read_only=True) as conn:
        return set(
            conn.execute(
                "SELECT operator_id, store_name, partition_id, version, num_keys "
                "FROM state_versions"
            ).fetchall()
        )


@pytest.mark.parametrize(
    "damage",
    [_bad_metadata, _offsets_v99, _empty_offsets, _empty_commit, _empty_schema, _empty_op_meta],
    ids=[
        "bad-metadata",
        "offsets-v99",
        "empty-offsets",
        "empty-commit",
        "empty-schema",
        "empty-operator-metadata",
    ],
)
def test_collect_keeps_the_healthy_versions(tmp_path: Path, damage: Damage) -> None:
    healthy = copy_sample("agg-hdfs", tmp_path / "a")
    assert cli("collect", str(healthy), "--db", str(tmp_path / "a.duckdb")).returncode == 0
    cp = copy_sample("agg-hdfs", tmp_path / "b")
    damage(cp)
    proc = cli("collect", str(cp), "--db", str(tmp_path / "b.duckdb"))
    assert proc.returncode == 0, proc.stderr
    expected = _versions(tmp_path / "a.duckdb")
    assert len(expected) > 40
    assert _versions(tmp_path / "b.duckdb") == expected
    assert "1 problems" in proc.stderr


@pytest.mark.parametrize("damage", [_bad_metadata, _empty_op_meta], ids=["metadata", "operator"])
def test_a_repaired_metadata_is_no_longer_a_problem(tmp_path: Path, damage: Damage) -> None:
    cp = copy_sample("agg-hdfs", tmp_path)
    saved = {p: p.read_bytes() for p in (cp / "metadata", cp / "state/0/_metadata/metadata")}
    bad = damage(cp)
    db = tmp_path / "h.duckdb"
    assert cli("collect", str(cp), "--db", str(db)).returncode == 0
    with duckdb.connect(str(db), read_only=True) as conn:
        assert conn.execute("SELECT path FROM problems").fetchall() == [(str(bad),)]
    bad.write_bytes(saved[bad])
    assert cli("collect", str(cp), "--db", str(db)).returncode == 0
    with duckdb.connect(str(db), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM problems").fetchall() == [(0,)]
