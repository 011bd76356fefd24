"""``stateglass sql --engine spark``: the stores a query reads, decoded by the Spark engine into
Parquet, give the rows, columns and types the session decodes itself, on real checkpoints.

One session over Spark (the suite's local SparkSession) serves every query; its decoded files
are reused by a later query over the same batches, and removed when it closes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.cli import main as cli_main
from stateglass.collectors.catalog import SqlLimits, SqlSession
from stateglass.collectors.catalog.spark_decoding import SparkDecoding
from tests.conftest import SAMPLES

pytestmark = pytest.mark.spark

# RocksDB with changelogs and SSTs; transformWithState (map state, timers).
ROOTS = [str(SAMPLES / "spark-4.3" / "agg-rocks-cl"), str(SAMPLES / "spark-4.3" / "tws-rocks-cl")]
QUERIES = {
    "last-batch": "SELECT * FROM agg_rocks_cl.op0_default",
    "earlier-batches": "SELECT * FROM agg_rocks_cl.op0_default WHERE batch_id IN (5, 9)",
    "one-partition": "SELECT * FROM agg_rocks_cl.op0_default WHERE partition_id = 2",
    "change-feed": "SELECT * FROM agg_rocks_cl.op0_default_changes WHERE batch_id >= 8",
    "map-state": "SELECT * FROM tws_rocks_cl.op0_by_kind",
    "timers": "SELECT * FROM tws_rocks_cl.op0_timers",
}
LIMITS = SqlLimits(time_s=600)  # a loaded machine starts Spark's Python workers slowly


def _rows(session: SqlSession, sql: str) -> tuple[Any, list[str]]:
    table = session.execute(f"{sql} ORDER BY ALL").table
    return table.schema, [json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist()]


@pytest.fixture(scope="module")
def local() -> Iterator[SqlSession]:
    with SqlSession(ROOTS, limits=LIMITS) as session:
        yield session


@pytest.fixture(scope="module")
def on_spark(spark: Any) -> Iterator[SqlSession]:
    # No master: the suite's SparkSession, as under spark-submit.
    with SqlSession(ROOTS, limits=LIMITS, spark=SparkDecoding()) as session:
        yield session


@pytest.mark.parametrize("name", list(QUERIES))
def test_rows_equal_the_local_decode(name: str, local: SqlSession, on_spark: SqlSession) -> None:
    sql = QUERIES[name]
    schema, rows = _rows(on_spark, sql)
    assert on_spark.last_decoded  # read from Spark's files (decoded now, or reused)
    expected_schema, expected = _rows(local, sql)
    assert rows and rows == expected
    assert schema.equals(expected_schema)


def test_decoded_files_are_reused_then_removed(spark: Any) -> None:
    decoding = SparkDecoding()
    sql = "SELECT count(*), max(partition_id) FROM agg_rocks_cl.op0_default"
    with SqlSession(ROOTS[:1], limits=LIMITS, spark=decoding) as session:
        first = session.execute(sql).table
        assert decoding.jobs == 1 and os.listdir(decoding.folder)
        # One column read of files decoded whole: the same files, no second job.
        again = session.execute("SELECT * FROM agg_rocks_cl.op0_default").table
        assert decoding.jobs == 1 and all(d.cached for d in session.last_decoded)
        assert first.column(0)[0].as_py() == again.num_rows > 0
    assert not os.path.exists(decoding.folder)


def test_cli_prints_the_same_rows(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    sql = f"{QUERIES['map-state']} ORDER BY ALL"
    runs = []
    for engine in ("local", "spark"):
        args = ["sql", ROOTS[1], "--engine", engine, "--format", "jsonl", "-e", sql]
        assert cli_main([*args, "--time-limit", "600"]) == 0
        runs.append(capsys.readouterr().out.splitlines())
    assert runs[0] and runs[0] == runs[1]


def test_scratch_inside_a_checkpoint_is_refused(tmp_path: Path, capsys: Any) -> None:
    scratch = os.path.join(ROOTS[0], "decoded")
    args = ["sql", ROOTS[0], "--engine", "spark", "--scratch", scratch, "-e", "SELECT 1"]
    assert cli_main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"stateglass: error: {scratch}: is inside the checkpoint")
    assert not os.path.exists(scratch)
