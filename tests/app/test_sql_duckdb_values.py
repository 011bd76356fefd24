"""`stateglass sql` prints every value DuckDB can make, in each text format: values Spark's
types hold but Python's ``datetime`` does not (nanoseconds, years past 9999), DuckDB's
infinities (its own text), and a time of day (its own text: ``24:00:00``, nanoseconds, an
offset kept). A value nothing prints is one line naming its column.

Each case runs the real command in a fresh process, as in ``test_sql_cli.py``: what a
conversion does can depend on which modules the process has loaded (pyarrow gives a
nanosecond timestamp as pandas' ``Timestamp`` only when pandas is loaded).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from stateglass.collectors.catalog import SqlSession
from tests.app.test_sql_cli import ROOT, _ok, _one_line_error, sg

AGG = ROOT / "agg-hdfs"
FORMATS = ("table", "csv", "jsonl")
# A query with one column `v`, and the text each format prints for its rows.
VALUES = [
    pytest.param(
        "SELECT TIMESTAMP_NS '2024-01-01 00:00:00.123456789' AS v",
        ["2024-01-01T00:00:00.123"],
        id="nanoseconds",
    ),
    pytest.param("SELECT 'infinity'::TIMESTAMP AS v", ["infinity"], id="infinite-timestamp"),
    pytest.param("SELECT '-infinity'::DATE AS v", ["-infinity"], id="minus-infinite-date"),
    # Spark's text of a year past 9999, as `stateglass state` prints one.
    pytest.param("SELECT '5877642-06-25'::DATE AS v", ["+5877642-06-25"], id="far-date"),
    pytest.param("SELECT TIMETZ '10:00:00+02' AS v", ["10:00:00+02"], id="time-with-offset"),
    # A time of day as DuckDB prints it: Python's `time` has no 24:00:00 and no nanoseconds.
    pytest.param("SELECT TIME '24:00:00' AS v", ["24:00:00"], id="end-of-day"),
    pytest.param(
        "SELECT '12:34:56.123456789'::TIME_NS AS v", ["12:34:56.123456789"], id="time-nanoseconds"
    ),
    pytest.param("SELECT TIME '00:00:00.5' AS v", ["00:00:00.5"], id="time-fraction"),
    # An infinity beside finite values: these print as they always did.
    pytest.param(
        "SELECT v FROM (VALUES (TIMESTAMPTZ '2024-01-01 00:46:02+00'), ('-infinity')) AS t(v) "
        "ORDER BY v DESC",
        ["2024-01-01T00:46:02.000Z", "-infinity"],
        id="infinity-among-timestamps",
    ),
]


def _printed(fmt: str, out: str) -> list[str]:
    """The values of column `v`, as printed in ``fmt``."""
    if fmt == "table":
        lines = out.splitlines()
        assert lines[0].strip() == "v" and lines[-1] == f"({len(lines) - 3} rows)", out
        return [line.rstrip() for line in lines[2:-1]]
    if fmt == "csv":
        header, *rows = csv.reader(io.StringIO(out))
        assert header == ["v"], out
        return [cell for (cell,) in rows]
    objects = [json.loads(line) for line in out.splitlines()]
    assert all(set(o) == {"v"} for o in objects), out
    return [o["v"] for o in objects]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("query", "expected"), VALUES)
def test_a_value_duckdb_makes_prints(
    query: str, expected: list[str], fmt: str, tmp_path: Path
) -> None:
    proc = sg("sql", str(AGG), "-e", query, "--format", fmt, cwd=tmp_path)
    assert _printed(fmt, _ok(proc)) == expected
    assert proc.stderr == ""


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_infinity_in_a_list_is_one_line_naming_its_column(fmt: str, tmp_path: Path) -> None:
    query = "SELECT 1 AS n, ['infinity'::DATE] AS days"
    error = _one_line_error(sg("sql", str(AGG), "-e", query, "--format", fmt, cwd=tmp_path))
    assert "column 'days': infinity inside a list" in error and "VARCHAR" in error


def test_a_time_with_an_offset_keeps_it_in_every_result() -> None:
    # The dashboard's results and Parquet files take the same text; a repeated name stays.
    with SqlSession([str(AGG)]) as session:
        table = session.execute(
            "SELECT 1 AS a, TIMETZ '10:00:00+02' AS a, {'at': TIMETZ '23:00:00-05'} AS s"
        ).table
    assert table.column_names == ["a", "a", "s"]
    assert [table.column(i).to_pylist() for i in range(3)] == [
        [1],
        ["10:00:00+02"],
        [{"at": "23:00:00-05"}],
    ]


def test_a_time_of_day_prints_nested_and_keeps_its_value_in_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    query = (
        "SELECT TIME '24:00:00' AS t, '12:34:56.123456789'::TIME_NS AS n, "
        "['24:00:00'::TIME] AS l, {'at': '23:59:59.999999999'::TIME_NS} AS s"
    )
    line = _ok(sg("sql", str(AGG), "-e", query, "--format", "jsonl", cwd=tmp_path))
    assert json.loads(line) == {
        "t": "24:00:00",
        "n": "12:34:56.123456789",
        "l": ["24:00:00"],
        "s": {"at": "23:59:59.999999999"},
    }
    # Parquet keeps the times themselves, not their text.
    _ok(sg("sql", str(AGG), "-e", query, "--format", "parquet", "-o", "t.parquet", cwd=tmp_path))
    table = pq.read_table(tmp_path / "t.parquet")
    assert [table.schema.field(n).type for n in ("t", "n")] == [pa.time64("us"), pa.time64("ns")]
    assert table.column("l").type.value_type == pa.time64("us")
    assert table.column("t").cast(pa.int64()).to_pylist() == [86_400_000_000]
    assert table.column("n").cast(pa.int64()).to_pylist() == [45_296_123_456_789]
