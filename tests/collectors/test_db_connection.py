"""Connections the collectors open: quiet on the terminal, whatever their mode."""

from __future__ import annotations

from pathlib import Path

from stateglass.collectors.db.read import read_query, reader
from stateglass.collectors.db.writer import Database


def test_no_connection_draws_duckdb_progress_bar(tmp_path: Path) -> None:
    # DuckDB would draw its bar on stderr, in the middle of the CLI's own progress, for any
    # query over 2 s: both the writer's and the readers' connections turn it off.
    path = str(tmp_path / "quiet.duckdb")
    db = Database(path)
    with db._transaction() as conn:
        assert conn.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)
    assert read_query(path, "SELECT current_setting('enable_progress_bar')") == [(False,)]
    with reader(path) as conn:
        assert conn.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)
