"""The interactive prompt of `stateglass sql`: statements, completion, and a real terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from stateglass.app.sql_prompt import Completer, statements
from tests.conftest import SAMPLES

ROOT = SAMPLES / "spark-4.3"
# A guard against a hung prompt, not a wait: reading returns as soon as the text arrives.
PROMPT_DEADLINE_S = 120.0


def _statements(*typed: str | type[BaseException]) -> list[str]:
    """What :func:`statements` yields for lines typed (or keys: an exception type)."""
    queue = list(typed)

    def read(prompt: str) -> str:
        if not queue:
            raise EOFError
        line = queue.pop(0)
        if isinstance(line, type):
            raise line()
        return line

    return list(statements(read))


def test_a_statement_ends_at_its_semicolon_across_lines() -> None:
    assert _statements("SELECT 1", "  + 1;", "SELECT 2;") == ["SELECT 1\n  + 1;", "SELECT 2;"]


def test_dot_commands_quit_and_ctrl_c() -> None:
    assert _statements(".tables", "SELECT", KeyboardInterrupt, "SELECT 3;", ".quit", "x;") == [
        ".tables",
        "SELECT 3;",
    ]


def test_completion_of_schemas_tables_and_columns() -> None:
    c = Completer([("agg_hdfs", "op0_default"), ("join_hdfs", "op0_left_keytonumvalues")], ["key"])
    assert c.candidates("agg") == ["agg_hdfs", "agg_hdfs.op0_default"]
    assert c.candidates("join_hdfs.op0_l") == ["join_hdfs.op0_left_keytonumvalues"]
    assert "key" in c.candidates("ke")
    assert [c("AGG_hdfs.", i) for i in range(2)] == ["agg_hdfs.op0_default", None]


def _read_until(fd: int, wanted: bytes, seen: bytearray, since: int | None = None) -> bytes:
    """Read the terminal until ``wanted`` appears in what arrives from now on (or after
    offset ``since`` of what was seen: it may have come in the chunk read last)."""
    start = len(seen) if since is None else since
    deadline = time.monotonic() + PROMPT_DEADLINE_S
    while wanted not in seen[start:]:
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            seen.extend(chunk)
    return bytes(seen)


def test_the_prompt_on_a_terminal_runs_queries_and_keeps_history(tmp_path: Path) -> None:
    parent, child = pty.openpty()
    env = {**os.environ, "HOME": str(tmp_path), "TERM": "dumb"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "stateglass.app.cli", "sql", str(ROOT)],
        stdin=child,
        stdout=child,
        stderr=child,
        cwd=tmp_path,
        env=env,
    )
    os.close(child)
    seen = bytearray()
    try:
        _read_until(parent, b"sql> ", seen)
        os.write(parent, b"SELECT 40 +\n")
        _read_until(parent, b"...> ", seen)
        os.write(parent, b"2 AS answer;\n")
        _read_until(parent, b"(1 rows)", seen)
        os.write(parent, b"SELECT * FROM no_such_table;\n")
        _read_until(parent, b"stateglass: error:", seen)
        # Only once readline reads again: a Ctrl+D typed while the terminal switches modes
        # can be lost.
        _read_until(parent, b"sql> ", seen, since=seen.rfind(b"stateglass: error:"))
        os.write(parent, b"\x04")  # Ctrl+D
        assert proc.wait(PROMPT_DEADLINE_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(parent)
    text = seen.decode(errors="replace")
    assert "answer" in text and "42" in text and "Traceback" not in text
    history = (tmp_path / ".stateglass" / "sql_history").read_text()
    assert "2 AS answer;" in history


def test_the_prompt_leaves_the_history_free_and_outlives_a_time_limit(tmp_path: Path) -> None:
    """A prompt stays open for as long as its user likes: it queries a copy of the history,
    so the collector can write the file meanwhile, and a query stopped mid-stream (rows
    already coming when the limit comes) is one line, after which the prompt goes on."""
    sample = ROOT / "session-rocks-cl"
    db = tmp_path / "h.duckdb"
    subprocess.run(
        [sys.executable, "-m", "stateglass.app.cli", "collect", str(sample), "--db", str(db)],
        check=True,
        capture_output=True,
    )
    parent, child = pty.openpty()
    env = {**os.environ, "HOME": str(tmp_path), "TERM": "dumb"}
    # Rows enough that the table is still taking them when the limit comes.
    argv = ["sql", str(sample), "--db", str(db), "--time-limit", "2", "--max-rows", "1000000000"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stateglass.app.cli", *argv],
        stdin=child,
        stdout=child,
        stderr=child,
        cwd=tmp_path,
        env=env,
    )
    os.close(child)
    seen = bytearray()
    try:
        _read_until(parent, b"sql> ", seen)
        assert b"1 checkpoint(s)" in seen  # the history is no checkpoint
        with duckdb.connect(str(db)) as writer:  # refused at once if the prompt held it
            writer.execute("CREATE TABLE written_meanwhile AS SELECT 1 AS x")
        os.write(parent, b"SELECT a.key, h.range FROM session_rocks_cl.op0_default a, ")
        os.write(parent, b"range(1000000000) h;\n")
        _read_until(parent, b"time limit", seen)
        _read_until(parent, b"sql> ", seen, since=seen.rfind(b"time limit"))
        os.write(parent, b"SELECT count(*) AS n FROM history.checkpoints;\n")
        _read_until(parent, b"(1 rows)", seen)
        # Only once readline reads again: a Ctrl+D typed while it switches modes can be lost.
        _read_until(parent, b"sql> ", seen, since=seen.rfind(b"(1 rows)"))
        os.write(parent, b"\x04")  # Ctrl+D
        assert proc.wait(PROMPT_DEADLINE_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(parent)
    assert "Traceback" not in seen.decode(errors="replace")
