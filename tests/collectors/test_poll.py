"""Polling (what ``watch`` does on URLs): a poll lists only ``commits/``, and a scan runs only
when a new commit appears. Run here on local paths through the FileSystem protocol; the
``remote`` tests run the same poller on S3 (moto)."""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from pathlib import Path

import pytest

from stateglass.app.commands import watch
from stateglass.collectors.db.read import read_query
from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.fs import LOCAL
from stateglass.collectors.watch.events import CheckpointWatcher, Debouncer
from stateglass.collectors.watch.poll import CommitPoller, newest_commit
from tests.collectors.helpers import ListingFileSystem, copy_sample


def test_a_poll_lists_commits_only_and_fires_on_a_new_commit(tmp_path: Path) -> None:
    cp = copy_sample("spark-4.3/agg-hdfs", tmp_path)
    shutil.move(cp / "commits" / "11", tmp_path / "commit-11")
    fs = ListingFileSystem()
    scanned: list[str] = []
    poller = CommitPoller(lambda _root: fs, scanned.append, interval_s=0.1)
    poller.add(str(cp))
    assert poller.poll_once() == [] and poller.poll_once() == []
    # Files of the running batch (offsets, state) do not start a scan; its commit does.
    (cp / "offsets" / "12").write_text((cp / "offsets" / "11").read_text())
    assert poller.poll_once() == []
    shutil.move(tmp_path / "commit-11", cp / "commits" / "11")
    assert poller.poll_once() == [str(cp)]
    assert poller.poll_once() == []
    assert scanned == [str(cp)]
    assert set(fs.listed) == {f"{cp}/commits"}
    assert len(fs.listed) == 1 + 5  # add() once, then one listing per poll


def test_no_commits_yet(tmp_path: Path) -> None:
    (tmp_path / "cp" / "offsets").mkdir(parents=True)
    assert newest_commit(LOCAL, str(tmp_path / "cp")) is None


class FlakyFileSystem(ListingFileSystem):
    """Lists fail while ``down`` is set, as an object store does when throttling."""

    down = False

    def names(self, path: str) -> list[tuple[str, bool]]:
        if self.down:
            raise CheckpointError(path, "throttled (SlowDown)")
        return super().names(path)


def test_a_failing_listing_is_reported_and_retried(tmp_path: Path) -> None:
    cp = copy_sample("spark-4.3/agg-hdfs", tmp_path)
    shutil.move(cp / "commits" / "11", tmp_path / "commit-11")
    fs = FlakyFileSystem()
    errors: list[str] = []
    scanned: list[str] = []
    poller = CommitPoller(
        lambda _r: fs, scanned.append, on_error=lambda r, e: errors.append(str(e))
    )
    poller.add(str(cp))
    fs.down = True
    shutil.move(tmp_path / "commit-11", cp / "commits" / "11")
    assert poller.poll_once() == []
    assert errors == [f"{cp}/commits: throttled (SlowDown)"]
    fs.down = False
    assert poller.poll_once() == [str(cp)] and scanned == [str(cp)]
    # commits/ gone (the checkpoint deleted): nothing new to scan.
    shutil.rmtree(cp / "commits")
    assert poller.poll_once() == []


@pytest.mark.parametrize("debounce", [0.2])
def test_watch_poll_records_a_new_commit(tmp_path: Path, debounce: float) -> None:
    """``stateglass watch --poll``: the CLI's whole path, by polling instead of events."""
    cp = copy_sample("spark-4.3/agg-hdfs", tmp_path)
    shutil.move(cp / "commits" / "11", tmp_path / "commit-11")
    db = str(tmp_path / "db.duckdb")
    args = argparse.Namespace(
        checkpoints=[str(cp)],
        db=db,
        engine="local",
        master=None,
        debounce=debounce,
        poll=True,
        poll_interval=0.3,
        verbose=False,
    )
    stop = threading.Event()
    thread = threading.Thread(target=watch.run, args=(args, stop))
    thread.start()
    try:
        deadline = time.monotonic() + 90

        def committed() -> int:
            try:
                return read_query(db, "SELECT count(*) FROM batches WHERE committed")[0][0]
            except Exception:
                return -1

        while committed() != 11 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert committed() == 11
        shutil.move(tmp_path / "commit-11", cp / "commits" / "11")
        while committed() != 12 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert committed() == 12
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive()


def test_watcher_takes_roots_while_running(tmp_path: Path) -> None:
    a = copy_sample("spark-4.3/agg-hdfs", tmp_path)
    added: list[str] = []
    watcher = CheckpointWatcher([], lambda _r: None, Debouncer(), on_added=added.append)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,))
    thread.start()
    try:
        watcher.add(str(a))
        watcher.add(str(a) + "/")  # the same checkpoint: watched once
        deadline = time.monotonic() + 10
        while not added and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert added == [str(a)]
