"""``stateglass watch``: an initial collect, then a re-scan once a batch's writes settle."""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from pathlib import Path

import pytest

from stateglass.app.commands import watch
from stateglass.collectors.db import read_query
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
