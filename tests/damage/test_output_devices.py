"""An output that is not a regular file (``/dev/null``, ``/dev/stdout``, a pipe) is written
into, as a shell redirect writes, never renamed over: a rename would replace the device itself
(as root, ``-o /dev/null`` once left a plain file at /dev/null). A FIFO stands in for the
device here, so that a regression cannot damage the machine running the tests."""

from __future__ import annotations

import io
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq

from stateglass.app.atomic import replacing
from stateglass.app.cli import main
from tests.conftest import SAMPLES

AGG = SAMPLES / "spark-4.3" / "agg-hdfs"


@contextmanager
def fifo(path: Path) -> Iterator[list[bytes]]:
    """A FIFO at ``path`` whose reader keeps what was written; filled when the block ends."""
    os.mkfifo(path)
    got: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    yield got
    reader.join(timeout=120)
    assert stat.S_ISFIFO(os.stat(path).st_mode), "the FIFO was replaced by a file"
    assert not list(path.parent.glob(".*stateglass-tmp")), "a temporary file was left"


def test_state_jsonl_into_a_pipe_keeps_the_pipe(tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    assert main(["state", str(AGG), "--format", "jsonl", "-o", str(plain)]) == 0
    with fifo(tmp_path / "pipe") as got:
        assert main(["state", str(AGG), "--format", "jsonl", "-o", str(tmp_path / "pipe")]) == 0
    assert got == [plain.read_bytes()]


def test_sql_parquet_into_a_pipe_keeps_the_pipe(tmp_path: Path) -> None:
    args = ["sql", str(AGG), "-e", "SELECT 42 AS answer", "--format", "parquet", "-o"]
    with fifo(tmp_path / "pipe") as got:
        assert main([*args, str(tmp_path / "pipe")]) == 0
    assert pq.read_table(io.BytesIO(got[0])).to_pylist() == [{"answer": 42}]


def test_a_replaced_output_into_a_pipe_keeps_the_pipe(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    with fifo(pipe) as got, replacing(str(pipe)) as tmp, open(tmp, "x", encoding="utf-8") as fh:
        fh.write("report")
    assert got == [b"report"]
