"""A batch's ``commits/N`` releases its checkpoint at once; other writes wait to settle."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirModifiedEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileMovedEvent,
    FileOpenedEvent,
)

from stateglass.collectors.watch.events import (
    OVERFLOW_LOGGER,
    CheckpointWatcher,
    Debouncer,
    event_paths,
    is_commit,
)


def test_is_commit() -> None:
    root = os.path.join(os.sep, "cp")
    assert is_commit(os.path.join(root, "commits", "12"), root)
    assert not is_commit(os.path.join(root, "offsets", "12"), root)
    assert not is_commit(os.path.join(root, "commits", ".12.crc"), root)
    assert not is_commit(os.path.join(root, "state", "0", "0", "commits", "3"), root)


def test_a_commit_is_due_without_waiting() -> None:
    d = Debouncer(delay_s=1.0, max_wait_s=10.0)
    d.add("/cp", 100.0)
    assert d.pop_due(100.5) == []
    d.add("/cp", 100.6, settled=True)
    assert d.pop_due(100.6) == ["/cp"]
    # Released once: later writes (Spark's maintenance) wait for the quiet period again.
    d.add("/cp", 101.0)
    assert d.pop_due(101.5) == []
    assert d.pop_due(102.0) == ["/cp"]


def test_watcher_marks_only_whole_commit_files_settled() -> None:
    root = os.path.join(os.sep, "cp")
    scanned: list[str] = []
    watcher = CheckpointWatcher([root], scanned.append, Debouncer(delay_s=60.0))
    watcher.event(os.path.join(root, "state", "0", "0", "3.delta"))
    watcher.event(os.path.join(root, "commits", ".3.1f2e.tmp"))
    assert watcher.debouncer.pop_due(0.0) == []
    watcher.event(os.path.join(root, "commits", ".3.1f2e.tmp"), os.path.join(root, "commits", "3"))
    assert watcher.debouncer.pop_due(0.0) == [root]


def test_a_directory_changing_because_an_entry_did_is_not_an_event() -> None:
    """Spark's last writes of a batch, as watchdog reports them: only the entries count."""
    commits = os.path.join(os.sep, "cp", "commits")
    tmp, crc = os.path.join(commits, ".2.ab.tmp"), os.path.join(commits, "..2.ab.tmp.crc")
    assert event_paths(FileMovedEvent(tmp, os.path.join(commits, "2"))) == (
        tmp,
        os.path.join(commits, "2"),
    )
    assert event_paths(FileCreatedEvent(crc)) == (crc, None)
    assert event_paths(FileClosedEvent(crc)) == (crc, None)
    assert event_paths(DirCreatedEvent(commits)) == (commits, None)
    assert event_paths(DirModifiedEvent(commits)) is None
    assert event_paths(FileOpenedEvent(crc)) is None
    assert event_paths(FileClosedNoWriteEvent(crc)) is None


class _RecordingWatcher(CheckpointWatcher):
    """The watcher, with the paths its events carried kept in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    def event(self, src_path: str, dest_path: str | None = None) -> None:
        self.seen.append(dest_path or src_path)
        super().event(src_path, dest_path)


def test_one_scan_per_commit_written_as_spark_writes_it(tmp_path: Path) -> None:
    """The commit, then its checksum renamed beside it after the scan began: one scan."""
    root = tmp_path / "cp"
    (root / "commits").mkdir(parents=True)
    (root / "offsets").mkdir()
    scanned: list[str] = []
    added: list[str] = []
    # A quiet period longer than the test: whatever else is recorded stays pending.
    watcher = _RecordingWatcher(
        [str(root)], scanned.append, Debouncer(delay_s=600.0), on_added=added.append
    )
    stop, thread = _run(watcher)
    try:
        assert _wait(lambda: added == [str(root)])
        (root / "commits" / ".2.ab.tmp").write_text("v1\n{}")
        os.rename(root / "commits" / ".2.ab.tmp", root / "commits" / "2")
        assert _wait(lambda: scanned == [str(root)])
        (root / "commits" / "..2.ab.tmp.crc").write_bytes(b"crc")
        os.rename(root / "commits" / "..2.ab.tmp.crc", root / "commits" / ".2.crc")
        # A temporary file written last: once its event is in, every earlier one is.
        marker = root / "offsets" / ".3.cd.tmp"
        marker.write_text("v1\n{}")
        assert _wait(lambda: str(marker) in watcher.seen)
        assert len(watcher.debouncer) == 0
        assert scanned == [str(root)]
    finally:
        stop.set()
        thread.join(10)


def _run(watcher: CheckpointWatcher) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,))
    thread.start()
    return stop, thread


def _wait(cond: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    return cond()


def test_commits_created_after_the_watch_starts_are_seen(tmp_path: Path) -> None:
    """A query that has not committed yet: commits/ appears later, and is then watched."""
    root = tmp_path / "cp"
    (root / "offsets").mkdir(parents=True)
    scanned: list[str] = []
    added: list[str] = []
    watcher = CheckpointWatcher(
        [str(root)], scanned.append, Debouncer(delay_s=60.0), on_added=added.append
    )
    stop, thread = _run(watcher)
    try:
        assert _wait(lambda: added == [str(root)])
        (root / "commits").mkdir()
        assert _wait(lambda: str(root / "commits") in watcher.watched_dirs)
        assert watcher.watched_dirs == {str(root), str(root / "offsets"), str(root / "commits")}
        (root / "commits" / "0").write_text("v1\n{}")
        assert _wait(lambda: scanned == [str(root)])
    finally:
        stop.set()
        thread.join(10)


def test_an_inotify_overflow_rescans_once_and_goes_on(tmp_path: Path) -> None:
    """watchdog reports an overflow only as this warning (events are gone): every checkpoint
    watched by events is scanned once, and its later commits are still seen."""
    roots = [tmp_path / "a", tmp_path / "b"]
    for r in roots:
        (r / "commits").mkdir(parents=True)
    scanned: list[str] = []
    watcher = CheckpointWatcher(
        [str(r) for r in roots], scanned.append, Debouncer(delay_s=60.0), on_added=print
    )
    stop, thread = _run(watcher)
    try:
        assert _wait(lambda: len(watcher.event_roots) == 2)
        logging.getLogger(OVERFLOW_LOGGER).warning(
            "Inotify queue overflowed; filesystem events were lost"
        )
        assert _wait(lambda: sorted(scanned) == [str(r) for r in roots])
        assert watcher.overflows == 1
        (roots[0] / "commits" / "0").write_text("v1\n{}")
        assert _wait(lambda: len(scanned) == 3)
        assert scanned[-1] == str(roots[0])
    finally:
        stop.set()
        thread.join(10)
