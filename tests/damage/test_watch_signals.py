"""``watch`` stopped by a signal ends between two scans: the first SIGTERM lets the scan in
progress finish and be stored, a second signal stops it at once. Either way: exit 128 + signal, one
line, no traceback."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from stateglass.app.atomic import Terminated, signals_stop
from stateglass.collectors.db.read import read_query
from tests.damage.hostile import ROOT, blocked_on_fifo, copy_sample, delta_without_snapshot
from tests.damage.test_atomic_signals import _wait_for


def _watch_blocked_mid_scan(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, bytes, Path]:
    """A watch whose first scan is certainly in progress: it blocks opening a delta that is a
    FIFO with no writer. Returns the process, the FIFO, the delta's real bytes and the db."""
    cp = copy_sample("agg-hdfs", tmp_path)
    delta = delta_without_snapshot(cp)
    data = delta.read_bytes()
    delta.unlink()
    os.mkfifo(delta)
    db = tmp_path / "sg.duckdb"
    command = [sys.executable, "-m", "stateglass.app.cli", "watch", str(cp), "--db", str(db)]
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    _wait_for(lambda: blocked_on_fifo(proc.pid))
    return proc, delta, data, db


def _writer_once_read_again(proc: subprocess.Popen[str], fifo: Path) -> int:
    """``fifo`` opened for writing once the watch reads it again. The signal interrupts the
    watch's blocking open, which Python retries after the handler ran; in between the FIFO has
    no reader and a writer's open fails (ENXIO). Opened without blocking, so that a watch that
    died of the signal fails the test at once instead of hanging it."""
    opened: list[int] = []

    def open_writer() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the watch ended on the first signal: {_stopped(proc)}")
        try:
            opened.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
        return bool(opened)

    _wait_for(open_writer)
    return opened[0]


def _stopped(proc: subprocess.Popen[str]) -> str:
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return err


def test_the_first_sigterm_lets_the_scan_in_progress_finish(tmp_path: Path) -> None:
    proc, fifo, data, db = _watch_blocked_mid_scan(tmp_path)
    try:
        proc.send_signal(signal.SIGTERM)
        # Still mid-scan: a writer for the FIFO is then what the scan waits for.
        fd = _writer_once_read_again(proc, fifo)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except BaseException:
        proc.kill()  # a failed test leaves no watch behind
        proc.wait()
        raise
    err = _stopped(proc)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "stateglass: stopped by SIGTERM"
    # The scan that was in progress is stored, every version of it.
    assert read_query(str(db), "SELECT count(*) > 0 FROM state_versions") == [(True,)]


def test_a_second_signal_raises() -> None:
    """In this process (the main thread, as the CLI's): the first signal only sets the stop
    event, the second unwinds from wherever it lands."""
    stop = threading.Event()
    with pytest.raises(Terminated) as raised, signals_stop(stop) as received:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.is_set() and received == [signal.SIGTERM]
        os.kill(os.getpid(), signal.SIGHUP)
        raise AssertionError("the second signal did not stop the block")
    assert raised.value.signum == signal.SIGHUP
    # The handlers before the block are back.
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
