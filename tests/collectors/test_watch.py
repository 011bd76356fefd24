"""``stateglass watch``: an initial collect, then a re-scan once a batch's writes settle."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from stateglass.app import collecting
from stateglass.app.commands import watch
from stateglass.collectors.db.read import read_query
from tests.collectors.helpers import copy_sample


def _versions(db_path: str) -> int:
    return read_query(db_path, "SELECT count(*) FROM state_versions")[0][0]


def test_watch_rescans_after_new_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cp_dir = copy_sample("spark-4.3/agg-hdfs", tmp_path)
    held = tmp_path / "12.delta"
    shutil.move(cp_dir / "state" / "0" / "3" / "12.delta", held)
    shutil.move(cp_dir / "state" / "0" / "3" / "12.snapshot", tmp_path / "12.snapshot")
    shutil.move(cp_dir / "commits" / "11", tmp_path / "commit-11")
    db_path = str(tmp_path / "db.duckdb")
    args = argparse.Namespace(
        checkpoints=[str(cp_dir)], db=db_path, engine="local", master=None, debounce=0.2
    )
    stop = threading.Event()
    thread = threading.Thread(target=watch.run, args=(args, stop))
    thread.start()
    try:
        # A functional bound: generous, since CI machines are shared and slow.
        deadline = time.monotonic() + 90
        while "watching" not in capsys.readouterr().err and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _versions(db_path) == 47
        # Store directories are not watched (10,000 of them would swamp inotify): the batch's
        # state file lands unseen, and its commit triggers the scan that reads it.
        shutil.move(held, cp_dir / "state" / "0" / "3" / "12.delta")
        time.sleep(1.0)  # twice the debounce: nothing may have been scanned
        assert _versions(db_path) == 47
        # Spark writes a temp file, then renames it: only the whole file may count.
        tmp = cp_dir / "commits" / ".11.5f1c.tmp"
        shutil.copy(tmp_path / "commit-11", tmp)
        tmp.rename(cp_dir / "commits" / "11")
        while _versions(db_path) < 48 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _versions(db_path) == 48
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


HOLD_READ_LOCK = """
import os, sys, time, duckdb
conn = duckdb.connect(sys.argv[1], read_only=True)
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.02)
"""


def test_a_busy_database_at_start_does_not_end_the_watch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader in another process holding the database past the lock timeout while the
    watch starts: the first scans say so in one line, and the next commit is recorded."""
    cp_dir = copy_sample("spark-4.3/agg-hdfs", tmp_path)
    shutil.move(cp_dir / "commits" / "11", tmp_path / "commit-11")
    db_path = str(tmp_path / "db.duckdb")
    monkeypatch.setattr("stateglass.collectors.db.connection.DEFAULT_LOCK_TIMEOUT_S", 0.5)
    held, release = tmp_path / "held", tmp_path / "release"
    holders: list[subprocess.Popen[bytes]] = []
    real_scanner_for = collecting.scanner_for

    def scanner_then_reader(a: argparse.Namespace, **options: Any) -> tuple[Any, list[str]]:
        # The writer has made its tables; the reader takes the database before the first scan.
        out = real_scanner_for(a, **options)
        holders.append(
            subprocess.Popen([sys.executable, "-c", HOLD_READ_LOCK, db_path, held, release])
        )
        while not held.exists() and holders[0].poll() is None:
            time.sleep(0.02)
        return out

    monkeypatch.setattr(collecting, "scanner_for", scanner_then_reader)
    args = argparse.Namespace(
        checkpoints=[str(cp_dir)], db=db_path, engine="local", master=None, debounce=0.2
    )
    stop = threading.Event()
    thread = threading.Thread(target=watch.run, args=(args, stop))
    thread.start()
    try:
        deadline = time.monotonic() + 90
        err = ""
        while "watching" not in err and thread.is_alive() and time.monotonic() < deadline:
            err += capsys.readouterr().err
            time.sleep(0.05)
        assert "still locked" in err and "scanned again at its next change" in err
        assert thread.is_alive()
        release.touch()
        holders[0].wait(timeout=60)
        shutil.move(tmp_path / "commit-11", cp_dir / "commits" / "11")
        while _versions(db_path) < 48 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _versions(db_path) == 48
    finally:
        release.touch()
        for holder in holders:
            holder.wait(timeout=60)
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
