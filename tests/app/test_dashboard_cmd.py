"""``stateglass dashboard``: collect, watch, serve; and clean up its children when stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from stateglass.app.cli import main
from stateglass.app.commands.dashboard import _collect_for_dashboard
from stateglass.collectors.db.read import read_query
from tests.conftest import ROOT, SAMPLES


def test_not_a_checkpoint_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "sg.duckdb"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["dashboard", str(empty), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(empty) in err
    assert not db.exists()


def test_a_database_inside_a_checkpoint_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = tmp_path / "dedup-hdfs"
    shutil.copytree(SAMPLES / "spark-4.3" / "dedup-hdfs", checkpoint)
    before = sorted(checkpoint.rglob("*"))
    assert main(["dashboard", str(tmp_path), "--db", str(checkpoint / "sg.duckdb")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is inside the checkpoint" in err
    assert sorted(checkpoint.rglob("*")) == before


def test_a_folder_of_checkpoints_is_collected(tmp_path: Path) -> None:
    folder = tmp_path / "many"
    for name in ("dedup-hdfs", "fmgws-hdfs"):
        shutil.copytree(SAMPLES / "spark-4.3" / name, folder / "team" / name)
    db = str(tmp_path / "sg.duckdb")
    roots = _collect_for_dashboard([str(folder)], db)
    assert roots == [str(folder / "team" / n) for n in ("dedup-hdfs", "fmgws-hdfs")]
    assert sorted(r[0] for r in read_query(db, "SELECT checkpoint FROM checkpoints")) == roots


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False
    ).stdout
    return [int(p) for p in out.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead: only its parent has not reaped it yet.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1][0] != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc and ps --ppid")
def test_serves_then_stops_its_server_and_watcher(tmp_path: Path) -> None:
    folder = tmp_path / "cps"
    shutil.copytree(SAMPLES / "spark-4.3" / "dedup-hdfs", folder / "dedup-hdfs")
    port = _free_port()
    db = tmp_path / "sg.duckdb"
    args = ["dashboard", str(folder), "--db", str(db), "--port", str(port), "--headless"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stateglass.app.cli", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    children: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health") as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the dashboard never answered"
            time.sleep(0.05)
        children = _children(proc.pid)
        assert len(children) == 2  # the Streamlit server and the watcher
        assert read_query(str(db), "SELECT count(*) FROM checkpoints") == [(1,)]
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()
    deadline = time.monotonic() + 15
    while any(_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(c) for c in children)


def _cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return [a.decode() for a in fh.read().split(b"\0") if a]


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        pairs = [a.decode().split("=", 1) for a in fh.read().split(b"\0") if b"=" in a]
    return dict((k, v) for k, v in pairs)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc and ps --ppid")
def test_the_server_hands_new_paths_to_the_one_watcher(tmp_path: Path) -> None:
    """The server gets the watcher's control file and the allowed roots; a path added there
    (what the Watch box does) is collected by the same watcher: no new process."""
    from stateglass.app import allowed
    from stateglass.app.dashboard.watcher_child import CONTROL_ENV, WatcherRegistry

    folder, more = tmp_path / "cps", tmp_path / "more"
    shutil.copytree(SAMPLES / "spark-4.3" / "dedup-hdfs", folder / "dedup-hdfs")
    shutil.copytree(SAMPLES / "spark-4.3" / "agg-hdfs", more / "agg-hdfs")
    port = _free_port()
    db = tmp_path / "sg.duckdb"
    args = ["dashboard", str(folder), "--db", str(db), "--port", str(port), "--headless"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stateglass.app.cli", *args, "--allow-path", str(more)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while len(_children(proc.pid)) < 2 or not db.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        children = _children(proc.pid)
        watchers = [c for c in children if "stateglass.app.dashboard.watcher_child" in _cmdline(c)]
        (server,) = [c for c in children if c not in watchers]
        (watcher,) = watchers
        cmd = _cmdline(watcher)
        control = cmd[cmd.index("--control") + 1]
        env = _environ(server)
        assert env[CONTROL_ENV] == control
        assert json.loads(env[allowed.ALLOWED_ENV]) == [str(folder), str(more)]
        WatcherRegistry(str(db), control=env[CONTROL_ENV]).start([str(more / "agg-hdfs")])
        while len(_db_checkpoints(str(db))) < 2:
            assert time.monotonic() < deadline, "the watcher never collected the new path"
            time.sleep(0.3)
        assert _children(proc.pid) == children
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def _db_checkpoints(db: str) -> list[str]:
    try:
        return [r[0] for r in read_query(db, "SELECT checkpoint FROM checkpoints")]
    except Exception:
        return []  # the watcher holds the write lock for a moment
