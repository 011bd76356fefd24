"""A ``--jobs`` worker killed from outside (SIGKILL, as the out-of-memory killer does): the
parent stops with one line and status 2 within seconds, removes its scratch directory, and
writes nothing, instead of waiting forever for the result the dead worker held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from stateglass.collectors.db.read import read_query
from tests.damage.hostile import ROOT, copy_sample, store_files
from tests.damage.test_atomic_signals import _wait_for

# The parent notices a dead worker within the pool's liveness poll (half a second); this is
# only the guard that turns a hang back into a failure.
STOP_DEADLINE_S = 30.0

COMMANDS = [
    pytest.param("state", "stateglass-jobs-", id="state"),
    pytest.param("collect", "stateglass-collect-", id="collect"),
]


def _workers(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []


@pytest.mark.parametrize("blocked", [True, False], ids=["its-task-lost", "idle"])
@pytest.mark.parametrize(("command", "scratch"), COMMANDS)
def test_a_killed_worker_stops_the_parent(
    tmp_path: Path, command: str, scratch: str, blocked: bool
) -> None:
    """Partition 1's last zip is a FIFO with no writer: the worker reading it blocks there, so
    the run is certainly in its workers when one of them is killed. ``its-task-lost`` kills
    that worker (its partition can never come back); ``idle`` kills the other one."""
    cp = copy_sample("agg-rocks", tmp_path)
    fifo = store_files(cp, ".zip", part=1)[-1]
    fifo.unlink()
    os.mkfifo(fifo)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    db = tmp_path / "sg.duckdb"
    args = [str(cp), "--jobs", "2", *(["--db", str(db)] if command == "collect" else [])]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stateglass.app.cli", command, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmpdir)},
        start_new_session=True,
    )
    try:
        _wait_for(lambda: any(n.startswith(scratch) for n in os.listdir(tmpdir)))
        _wait_for(lambda: len(_workers(proc.pid)) == 2)
        holders: list[psutil.Process] = []
        _wait_for(lambda: bool(holders.extend(_opening_a_fifo(proc.pid)) or holders))
        (holder,) = holders
        victim = holder if blocked else next(w for w in _workers(proc.pid) if w != holder)
        victim.send_signal(signal.SIGKILL)
        started = time.monotonic()
        _, err = proc.communicate(timeout=STOP_DEADLINE_S)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"stateglass: error: {cp}: a worker process ({victim.pid})")
    assert "was killed by SIGKILL" in lines[0] and "try fewer --jobs" in lines[0]
    assert "Traceback" not in err
    print(f"stopped {took:.2f} s after the kill")
    assert os.listdir(tmpdir) == []
    # No worker outlives the parent (the one blocked on the FIFO included).
    assert psutil.pid_exists(victim.pid) is False or victim.status() == psutil.STATUS_ZOMBIE
    if command == "collect":
        assert read_query(str(db), "SELECT count(*) FROM state_versions") == [(0,)]


def _opening_a_fifo(pid: int) -> list[psutil.Process]:
    """The workers blocked opening a FIFO that has no writer (Linux's wait channel for that is
    ``wait_for_partner``; an idle worker waits in ``anon_pipe_read`` for its next task)."""
    found = []
    for worker in _workers(pid):
        try:
            wchan = Path(f"/proc/{worker.pid}/wchan").read_text()
        except OSError:
            continue
        if wchan == "wait_for_partner":
            found.append(worker)
    return found
