"""The Overview's Watch box: only paths under the allowed roots, one fixed refusal, and one
watcher process for every checkpoint a visitor adds."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app import allowed
from stateglass.app.dashboard.context import DB_ENV
from stateglass.app.escape import md
from stateglass.collectors.db.read import read_query
from tests.collectors.helpers import copy_sample

TIMEOUT_S = 60


def _overview() -> None:
    from stateglass.app.dashboard.views import overview

    overview.render()


def _watchers() -> list[int]:
    """Live watcher processes started by this test process (from /proc)."""
    parent: dict[int, int] = {}
    cmd: dict[int, bytes] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd[int(entry)] = fh.read()
        except OSError:
            continue
        if fields[0] != b"Z":
            parent[int(entry)] = int(fields[1])
    mine = {os.getpid()}
    for _ in range(3):  # children, grandchildren, ...
        mine |= {pid for pid, ppid in parent.items() if ppid in mine}
    return sorted(
        p
        for p in mine
        if p in parent and b"stateglass.app.dashboard.watcher_child" in cmd.get(p, b"")
    )


def _submit(path: str) -> AppTest:
    at = AppTest.from_function(_overview, default_timeout=TIMEOUT_S)
    at.run()
    at.text_input(key="sg_watch_path").input(path)
    at.button[0].click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def allowed_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "checkpoints"
    root.mkdir()
    monkeypatch.setenv(allowed.ALLOWED_ENV, allowed.encode([str(root)]))
    monkeypatch.setenv(DB_ENV, str(tmp_path / "db.duckdb"))
    monkeypatch.delenv("STATEGLASS_WATCH_CONTROL", raising=False)
    return root


def test_paths_outside_the_roots_are_refused_alike(allowed_root: Path, tmp_path: Path) -> None:
    (allowed_root / "link-out").symlink_to("/etc")
    typed = [
        "/",
        "/etc",
        "/root",
        "/etc/passwd",
        "/nonexistent/x",
        f"{allowed_root}/../..",
        f"{allowed_root}/link-out",
        "~",
    ]
    messages = set()
    for path in typed:
        at = _submit(path)
        messages.update(e.value for e in at.error)
        assert len(at.error) == 1, path
    # One message, whatever exists on disk (escaped as every page escapes text).
    assert messages == {md(allowed.REFUSAL)}
    assert _watchers() == []
    assert not os.path.exists(tmp_path / "db.duckdb")


def test_a_folder_inside_the_roots_is_watched_by_one_watcher(
    allowed_root: Path, tmp_path: Path
) -> None:
    a = copy_sample("spark-4.3/agg-hdfs", allowed_root / "team-a")
    b = copy_sample("spark-4.3/join-hdfs", allowed_root / "team-b")
    db = str(tmp_path / "db.duckdb")
    try:
        _submit(str(allowed_root / "team-a"))
        _submit(str(allowed_root / "team-b"))
        deadline = time.monotonic() + 90
        rows: set[str] = set()
        while rows != {str(a), str(b)} and time.monotonic() < deadline:
            time.sleep(0.2)
            if os.path.exists(db):
                try:
                    rows = {r[0] for r in read_query(db, "SELECT checkpoint FROM checkpoints")}
                except Exception:
                    continue  # the watcher holds the write lock for a moment
        assert rows == {str(a), str(b)}
        assert len(_watchers()) == 1
        # Inside the roots, errors may say what is there.
        at = _submit(str(allowed_root / "nothing-here"))
        assert [e.value for e in at.error] != [allowed.REFUSAL]
    finally:
        for pid in _watchers():
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
