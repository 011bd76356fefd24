"""A batch's ``commits/N`` releases its checkpoint at once; other writes wait to settle."""

from __future__ import annotations

import os

from collectors.watch import CheckpointWatcher, Debouncer, is_commit


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
