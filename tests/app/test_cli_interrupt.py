"""A Ctrl+C that lands inside a DuckDB query ends the command like any other Ctrl+C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import duckdb
import pytest

from stateglass.app.cli import EXIT_INTERRUPTED, exit_status
from tests.conftest import ROOT, SAMPLES


def test_an_interrupted_query_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    conn = duckdb.connect()
    started = threading.Event()
    caught: list[BaseException] = []

    def run() -> None:
        started.set()
        try:
            conn.execute("SELECT count(*) FROM range(10000000000) a").fetchall()
        except BaseException as exc:  # what DuckDB raises is the point of the test
            caught.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    started.wait()
    while worker.is_alive():
        conn.interrupt()
        worker.join(timeout=0.05)
    assert caught, "the query was not interrupted"
    assert exit_status(caught[0]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "stateglass: interrupted\n"


def test_a_signal_inside_a_query_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # What DuckDB's Python client raised when SIGINT reached a watcher judging health (seen
    # in a test run; a signal's timing cannot be arranged here).
    assert exit_status(RuntimeError("Query interrupted")) == EXIT_INTERRUPTED
    assert exit_status(RuntimeError("something else")) is None
    assert capsys.readouterr().err == "stateglass: interrupted\n"


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_sigterm_inside_a_query_is_a_stop_by_sigterm() -> None:
    """DuckDB turns the signal that lands mid-query into its own "interrupted": the command
    still exits as a SIGTERM stops any command (a deploy gate tells the two apart)."""
    sample = SAMPLES / "spark-4.3" / "agg-hdfs"
    # Hours of work: this machine counts 10^10 rows in under 2 s of CPU, past the wait below.
    query = "SELECT count(*) FROM range(1000000000000000) a"
    proc = subprocess.Popen(
        [sys.executable, "-m", "stateglass.app.cli", "sql", str(sample), "-e", query],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        # Start-up takes well under a second of CPU; past 2 s the query is running.
        deadline = time.monotonic() + 120
        while _cpu_seconds(proc.pid) < 2.0:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err == "stateglass: stopped by SIGTERM\n"
