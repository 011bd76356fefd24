"""A Ctrl+C that lands inside a DuckDB query ends the command like any other Ctrl+C."""

from __future__ import annotations

import threading

import duckdb
import pytest

from stateglass.app.cli import EXIT_INTERRUPTED, exit_status


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
