"""Fleets and live checkpoints on S3: ``collect`` on a prefix finds every checkpoint below it,
and ``watch s3://…`` polls, records every committed batch, and keeps the history of files
Spark later deletes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.db.read import read_query
from tests.remote.conftest import BUCKET, REMOTE_SAMPLES, S3

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # four checkpoints collected over S3
def test_collect_on_a_prefix_finds_every_checkpoint(s3: S3, cli: Any, tmp_path: Path) -> None:
    db = tmp_path / "sg.duckdb"
    r = cli("collect", f"s3://{BUCKET}/samples/", "--db", str(db), "--verbose")
    assert r.code == 0, r.err
    assert f"collected {len(REMOTE_SAMPLES)} checkpoint(s)" in r.err
    rows = read_query(str(db), "SELECT checkpoint FROM checkpoints ORDER BY 1")
    assert [c for (c,) in rows] == sorted(s3.url(s) for s in REMOTE_SAMPLES)


def _batches(local: Path) -> dict[int, list[tuple[int, str]]]:
    """The sample's files grouped by the batch that wrote them, in Spark's order within one:
    offsets first, then sources and state, the commit last."""
    out: dict[int, list[tuple[int, str]]] = {}
    for path in local.rglob("*"):
        rel = path.relative_to(local).as_posix()
        if not path.is_file() or path.name.startswith("."):
            continue
        top, head = rel.split("/", 1)[0], path.name.split(".")[0]
        if top in ("offsets", "commits", "sources") and head.isdigit():
            batch, order = int(head), {"offsets": 0, "sources": 1, "commits": 3}[top]
        elif top == "state" and head.isdigit():
            batch, order = int(head) - 1, 2  # state version V is written by batch V-1
        else:
            batch, order = 0, 0  # metadata, operator metadata, schemas
        out.setdefault(batch, []).append((order, rel))
    return {b: sorted(files) for b, files in out.items()}


def test_watch_records_every_batch_and_keeps_deleted_files(s3: S3, tmp_path: Path) -> None:
    local = Path(s3.local("spark-4.3/agg-hdfs"))
    batches = _batches(local)
    prefix, db = "live/agg-hdfs", tmp_path / "sg.duckdb"
    url = f"s3://{BUCKET}/{prefix}"

    def put(batch: int) -> None:
        for _, rel in batches[batch]:
            body = (local / rel).read_bytes()
            s3.client.put_object(Bucket=BUCKET, Key=f"{prefix}/{rel}", Body=body)

    put(0)
    cmd = [sys.executable, "-m", "stateglass.app.cli", "watch", url, "--db", str(db)]
    watch = subprocess.Popen(
        # Every re-scan lists in full (a scan by name cannot see purged files; the periodic
        # reconcile that does is tested in tests/collectors/test_scan_by_name.py).
        [*cmd, "--poll-interval", "0.3", "--debounce", "0.1", "--reconcile-scans", "0"],
        cwd=REPO,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    committed = "SELECT count(*) FROM batches WHERE committed"
    last = max(batches)
    gone = [rel for _, rel in batches[0] + batches[1] if rel.endswith(".delta")]
    try:
        _wait(db, committed, 1, watch)
        for batch in range(1, last):
            put(batch)
            time.sleep(0.2)
        _wait(db, committed, last, watch)
        # Spark's maintenance deletes old deltas; the next commit's scan sees them gone.
        assert gone
        for rel in gone:
            s3.client.delete_object(Bucket=BUCKET, Key=f"{prefix}/{rel}")
        put(last)
        _wait(db, committed, last + 1, watch)
        _wait(db, "SELECT count(*) FROM state_files WHERE purged", len(gone), watch)
    finally:
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=30)
    assert "Traceback" not in err
    purged = read_query(str(db), "SELECT path FROM state_files WHERE purged ORDER BY 1")
    assert sorted(p for (p,) in purged) == sorted(f"{url}/{rel}" for rel in gone)
    # The deleted files' versions keep their history.
    versions = read_query(str(db), "SELECT count(*) FROM state_versions WHERE version <= 2")
    assert versions[0][0] > 0
    rows = read_query(str(db), "SELECT batch_id FROM batches WHERE committed ORDER BY 1")
    assert [b for (b,) in rows] == list(range(last + 1))


def _wait(db: Path, sql: str, want: int, proc: subprocess.Popen[str], limit_s: float = 90) -> None:
    deadline = time.monotonic() + limit_s
    got = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        if db.exists():
            try:
                got = read_query(str(db), sql, timeout_s=2)[0][0]
            except Exception:  # the watcher holds the lock for a moment: ask again
                got = None
            if got == want:
                return
        time.sleep(0.2)
    raise AssertionError(f"{sql}: {got}, expected {want}")
