"""A new SST whose block disagrees with RocksDB's own checksum is a ``ChecksumMismatch``
problem, found by a full listing and by a watcher's scan by name alike, with no Hadoop sidecar
to tell (as on an object store). Real files: Spark 4.3's RocksDB sample, one commit held back
and then put in place, as a new batch arrives."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.reconcile import ReconcilePolicy
from stateglass.collectors.scan.scanner import Scanner
from stateglass.parsers.sst import sst_blocks
from tests.conftest import SAMPLES, copy_checkpoint

SAMPLE = SAMPLES / "spark-4.3" / "agg-rocks"  # no changelogs: every batch uploads a zip


def _ssts_of(zip_path: Path) -> set[str]:
    with zipfile.ZipFile(zip_path) as z:
        text = z.read("metadata").decode()
    return {f["dfsSstFileName"] for f in json.loads(text.split("\n", 1)[1])["sstFiles"]}


def _hold_back_last_batch(cp: Path, held: Path) -> Path:
    """Move the newest commit's log entries, zips and new SSTs to ``held``; return the first
    new SST of partition 0 (its path once put back)."""
    last = max(int(p.name) for p in (cp / "commits").iterdir() if p.name.isdigit())
    moved = [cp / "commits" / str(last), cp / "offsets" / str(last)]
    new_ssts = []
    for part in sorted(p for p in (cp / "state" / "0").iterdir() if p.name.isdigit()):
        new, old = part / f"{last + 1}.zip", part / f"{last}.zip"
        names = sorted(_ssts_of(new) - _ssts_of(old))
        new_ssts += [part / "SSTs" / n for n in names]
        moved.append(new)
    moved += new_ssts
    for path in moved:
        for f in (path, path.parent / f".{path.name}.crc"):
            target = held / f.relative_to(cp)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(f), str(target))
    assert new_ssts
    return new_ssts[0]


def _put_back_damaged(cp: Path, held: Path, sst: Path) -> None:
    data = bytearray((held / sst.relative_to(cp)).read_bytes())
    block = sst_blocks(bytes(data))[-1]  # the metaindex: RocksDB could not open the table
    data[block.offset + 3] ^= 0x20
    (held / sst.relative_to(cp)).write_bytes(bytes(data))
    (held / sst.parent.relative_to(cp) / f".{sst.name}.crc").unlink()
    shutil.copytree(held, cp, dirs_exist_ok=True)


@pytest.mark.parametrize("by_name", [True, False], ids=["by-name", "full-listing"])
def test_a_new_damaged_sst_is_a_checksum_problem(tmp_path: Path, by_name: bool) -> None:
    cp = copy_checkpoint(SAMPLE, tmp_path / "cp")
    sst = _hold_back_last_batch(cp, tmp_path / "held")
    db = str(tmp_path / "sg.duckdb")
    policy = ReconcilePolicy(every_scans=1000, every_s=1e9) if by_name else None
    scanner = Scanner(Database(db), reconcile=policy)
    scanner.scan(str(cp))  # nothing known yet: a full listing, every SST whole
    assert read_query(db, "SELECT count(*) FROM problems")[0][0] == 0
    _put_back_damaged(cp, tmp_path / "held", sst)

    summary = scanner.scan(str(cp))
    if by_name:
        assert policy is not None and not policy.full_due(str(cp))
    rows = read_query(db, "SELECT path, kind, message FROM problems")
    assert [(r[0], r[1]) for r in rows] == [(str(sst), "ChecksumMismatch")], rows
    offset = sst_blocks((SAMPLE / sst.relative_to(cp)).read_bytes())[-1].offset
    assert (
        rows[0][2] == f"RocksDB's block checksums: metaindex block at {offset}: checksum mismatch"
    )
    assert summary.problems == 1
