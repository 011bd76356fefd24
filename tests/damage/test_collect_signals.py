"""``collect --jobs 2`` stopped by a signal: the workers go, their scratch goes, nothing is
written (the same guarantees as ``state --jobs``, tests/damage/test_atomic_signals.py)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from stateglass.collectors.db.read import read_query
from tests.damage.hostile import ROOT, blocked_on_fifo, copy_sample, store_files
from tests.damage.test_atomic_signals import _wait_for

CASES = [
    pytest.param(signal.SIGTERM, False, "stateglass: stopped by SIGTERM", 128 + 15, id="SIGTERM"),
    pytest.param(signal.SIGHUP, False, "stateglass: stopped by SIGHUP", 128 + 1, id="SIGHUP"),
    # A terminal's Ctrl+C reaches the whole process group, workers included.
    pytest.param(signal.SIGINT, True, "stateglass: interrupted", 130, id="Ctrl+C"),
]


@pytest.mark.parametrize(("sig", "group", "line", "status"), CASES)
def test_signal_mid_collect_leaves_nothing(
    tmp_path: Path, sig: signal.Signals, group: bool, line: str, status: int
) -> None:
    """A worker blocks reading partition 1's last zip (a FIFO with no writer): the collect is
    then certainly in its workers, its scratch directory there, when the signal arrives."""
    cp = copy_sample("agg-rocks", tmp_path)
    zip_path = store_files(cp, ".zip", part=1)[-1]
    zip_path.unlink()
    os.mkfifo(zip_path)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    db = tmp_path / "sg.duckdb"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stateglass.app.cli",
            "collect",
            str(cp),
            "--db",
            str(db),
            "--jobs",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmpdir)},
        start_new_session=True,
    )
    try:
        _wait_for(lambda: any(n.startswith("stateglass-collect-") for n in os.listdir(tmpdir)))
        _wait_for(lambda: blocked_on_fifo(proc.pid))
        assert proc.poll() is None
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # No worker is left blocked on the FIFO: opening it for writing needs a reader.
    try:
        os.close(os.open(zip_path, os.O_WRONLY | os.O_NONBLOCK))
        left_behind = True
    except OSError as exc:
        assert exc.errno == errno.ENXIO
        left_behind = False
    assert proc.returncode == status, err
    assert err.strip().splitlines() == [line]
    assert os.listdir(tmpdir) == []
    assert not left_behind
    # The scan writes its results in one transaction after the chains: none was written.
    assert read_query(str(db), "SELECT count(*) FROM state_versions") == [(0,)]
