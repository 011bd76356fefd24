"""A SQL result's rows print as `stateglass state` prints the same state.

The state goes out of `stateglass state --format parquet`, through DuckDB (so its types are
DuckDB's: TIMESTAMPTZ, MAP, DECIMAL, BLOB…) and back to Arrow, and the result's writers must
give the lines `stateglass state --format jsonl` gives.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stateglass.app.cli import main
from stateglass.app.errors import OutputError
from stateglass.app.sql_output import ResultWriter, open_result
from tests.conftest import SAMPLES

S43 = SAMPLES / "spark-4.3"
CASES = [
    pytest.param(S43 / "join-hdfs", ["--store", "left-keyWithIndexToValue"], id="join"),
    pytest.param(S43 / "session-rocks-cl", [], id="session-rocks"),
    pytest.param(S43 / "fmgws-hdfs", [], id="fmgws"),
    pytest.param(S43 / "dedup-hdfs", [], id="dedup"),
    pytest.param(S43 / "tws-rocks-cl", ["--state-var", "by_kind"], id="tws-map"),
    pytest.param(S43 / "tws-rocks-cl", ["--state-var", "recent"], id="tws-list"),
    pytest.param(S43 / "tws-rocks-cl", ["--read-timers"], id="tws-timers"),
]  # fmt: skip
# Every type the samples hold: timestamps, dates, decimals, binary, lists, maps, nested structs.
AGG = S43 / "agg-hdfs"


def _state(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["state", *argv]) == 0
    return capsys.readouterr().out


def _through_duckdb(parquet: Path) -> Iterator[pa.RecordBatchReader]:
    con = duckdb.connect()
    try:
        yield con.sql(f"SELECT * FROM read_parquet('{parquet}')").to_arrow_reader()
    finally:
        con.close()


def _written(fmt: str, reader: Any, path: Path | None = None, max_rows: int = 1000) -> str:
    with open_result(fmt, None if path is None else str(path), "UTC", max_rows) as out:
        assert isinstance(out, ResultWriter)
        out.write(reader)
    return path.read_text() if path is not None and fmt != "parquet" else ""


@pytest.mark.parametrize(("checkpoint", "pick"), CASES)
def test_jsonl_of_a_result_is_state_jsonl(
    checkpoint: Path, pick: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _state(capsys, str(checkpoint), *pick)
    parquet = tmp_path / "state.parquet"
    _state(capsys, str(checkpoint), *pick, "--format", "parquet", "-o", str(parquet))
    for reader in _through_duckdb(parquet):
        got = _written("jsonl", reader, tmp_path / "out.jsonl")
    assert sorted(got.splitlines()) == sorted(expected.splitlines())
    assert len(expected.splitlines()) > 3


def _suffixed(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A repeated field name with the suffix Arrow's columns give it (``sum``, ``sum_1``)."""
    seen: dict[str, int] = {}
    out = {}
    for key, value in pairs:
        n = seen.get(key, 0)
        seen[key] = n + 1
        out[key if n == 0 else f"{key}_{n}"] = value
    return out


def test_every_type_renders_as_state_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The aggregation buffer repeats field names (sum, sum): Arrow and DuckDB need them unique,
    # so the result names them sum_1…, as Parquet does. Null fields are left out, so compare
    # the fields present in both.
    expected = _state(capsys, str(AGG))
    parquet = tmp_path / "state.parquet"
    _state(capsys, str(AGG), "--format", "parquet", "-o", str(parquet))
    for reader in _through_duckdb(parquet):
        got = _written("jsonl", reader, tmp_path / "out.jsonl")

    def key(line: str) -> str:
        return json.dumps(json.loads(line)["key"], sort_keys=True)

    by_key = {key(line): json.loads(line) for line in got.splitlines()}
    assert len(by_key) == len(expected.splitlines()) > 5
    compared: set[str] = set()
    for line in expected.splitlines():
        spark = json.loads(line, object_pairs_hook=_suffixed)
        ours = by_key[key(line)]
        assert ours["key"] == spark["key"]
        assert ours["partition_id"] == spark["partition_id"]
        shared = set(spark["value"]) & set(ours["value"])
        assert {k: ours["value"][k] for k in shared} == {k: spark["value"][k] for k in shared}
        compared |= shared
    assert {"min", "max", "max_1", "max_2", "max_3", "first", "first_1", "last"} <= compared


def test_csv_splits_structs_into_leaves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parquet = tmp_path / "state.parquet"
    _state(capsys, str(AGG), "--format", "parquet", "-o", str(parquet))
    for reader in _through_duckdb(parquet):
        got = _written("csv", reader, tmp_path / "out.csv")
    rows = list(csv.DictReader(io.StringIO(got)))
    assert rows and "key.window.start" in rows[0] and "value.count" in rows[0]
    assert all(r["key.window.start"].endswith("Z") for r in rows)  # Spark's text, in UTC


def test_table_stops_at_max_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = pa.table({"n": list(range(50))})
    got = _written("table", table.to_reader(max_chunksize=7), tmp_path / "t.txt", max_rows=10)
    lines = got.splitlines()
    assert lines[0].strip() == "n" and lines[2].strip() == "0"
    assert "(10 rows)" in got and "stopped at 10 rows" in got


def test_parquet_keeps_the_result_types(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parquet = tmp_path / "state.parquet"
    _state(capsys, str(AGG), "--format", "parquet", "-o", str(parquet))
    for reader in _through_duckdb(parquet):
        _written("parquet", reader, tmp_path / "out.parquet")
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.num_rows == pq.read_table(parquet).num_rows
    assert pa.types.is_struct(out.schema.field("key").type)


def test_parquet_row_groups_gather_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB's batches are gathered whole into row groups of up to ROW_GROUP_ROWS rows (or
    as many as ROW_GROUP_BYTES hold), every row kept in order."""
    import stateglass.app.output as output

    monkeypatch.setattr(output, "ROW_GROUP_ROWS", 10)
    batches = [pa.record_batch({"n": list(range(at, at + 4))}) for at in range(0, 36, 4)]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, iter(batches))
    _written("parquet", reader, tmp_path / "rows.parquet")
    meta = pq.ParquetFile(tmp_path / "rows.parquet").metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert groups == [8, 8, 8, 8, 4]  # a third batch of 4 would pass 10
    assert pq.read_table(tmp_path / "rows.parquet").column("n").to_pylist() == list(range(36))

    monkeypatch.setattr(output, "ROW_GROUP_ROWS", 1 << 20)
    monkeypatch.setattr(output, "ROW_GROUP_BYTES", 2 * batches[0].nbytes)
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, iter(batches))
    _written("parquet", reader, tmp_path / "bytes.parquet")
    meta = pq.ParquetFile(tmp_path / "bytes.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [8] * 4 + [4]


def test_a_failed_query_leaves_no_file(tmp_path: Path) -> None:
    def failing() -> Iterator[pa.RecordBatch]:
        yield pa.record_batch({"n": [1, 2]})
        raise RuntimeError("the query stopped")

    schema = pa.schema([("n", pa.int64())])
    for fmt in ("jsonl", "csv", "parquet", "table"):
        target = tmp_path / f"out.{fmt}"
        with pytest.raises(RuntimeError):
            _written(fmt, pa.RecordBatchReader.from_batches(schema, failing()), target)
        assert list(tmp_path.iterdir()) == [], fmt


EXOTIC = (
    "SELECT TIME '12:00' AS t, INTERVAL 1 DAY AS i, [1, 2]::INT[2] AS a, MAP {'k': 1} AS m, "
    "1::HUGEINT AS h, 'x'::BLOB AS b, 'NaN'::DOUBLE AS d, TIMESTAMP_NS '2024-01-01 00:00:00' AS n, "
    "'a'::ENUM('a', 'b') AS e, '{\"x\":1}'::JSON AS j, 1::BIT AS bit"
)


def test_every_duckdb_type_prints(tmp_path: Path) -> None:
    con = duckdb.connect()
    try:
        got = _written("jsonl", con.sql(EXOTIC).to_arrow_reader(), tmp_path / "out.jsonl")
        cells = _written("csv", con.sql(EXOTIC).to_arrow_reader(), tmp_path / "out.csv")
        with pytest.raises(OutputError, match="cannot write parquet"):
            _written("parquet", con.sql(EXOTIC).to_arrow_reader(), tmp_path / "out.parquet")
    finally:
        con.close()
    row = json.loads(got)
    assert row["t"] == "12:00:00" and row["i"] == "1 days" and row["a"] == [1, 2]
    assert row["m"] == {"k": 1} and row["d"] == "NaN" and row["e"] == "a"
    assert cells.splitlines()[1].startswith("12:00:00,1 days,")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "out.jsonl"]


# Numbers inside a list, map or struct, and the text Spark's `to_json` gives them (PySpark 4.3,
# `to_json(array(cast(1.5 as decimal(10,2))))` and so on): decimals bare, doubles as Java
# prints them. The table and CSV print a nested value as that JSON text.
NESTED_NUMBERS = [
    pytest.param("[1.5::DECIMAL(10,2)]", "[1.50]", id="decimal-in-list"),
    pytest.param("MAP {'a': 2.25::DECIMAL(10,3)}", '{"a":2.250}', id="decimal-in-map"),
    pytest.param("[{'d': 1.5::DECIMAL(10,2)}]", '[{"d":1.50}]', id="decimal-in-struct-in-list"),
    pytest.param("[1e-5::DOUBLE, 1e20]", "[1.0E-5,1.0E20]", id="doubles-in-list"),
    pytest.param("1e-5::DOUBLE", "1.0E-5", id="double"),
]


@pytest.mark.parametrize(("value", "spark"), NESTED_NUMBERS)
def test_numbers_print_as_spark_to_json_in_every_text_format(
    value: str, spark: str, tmp_path: Path
) -> None:
    query = f"SELECT {value} AS v"
    con = duckdb.connect()
    try:
        texts = {
            fmt: _written(fmt, con.sql(query).to_arrow_reader(), tmp_path / f"out.{fmt}")
            for fmt in ("jsonl", "csv", "table")
        }
    finally:
        con.close()
    assert texts["jsonl"] == f'{{"v":{spark}}}\n'
    assert list(csv.reader(io.StringIO(texts["csv"]))) == [["v"], [spark]]
    assert texts["table"].splitlines()[2].rstrip() == spark


def test_state_to_parquet_is_written_a_row_group_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``state --format parquet`` writes each row group as its partitions arrive (memory holds
    one, not the store), and the file holds the same rows as one written whole."""
    import stateglass.app.output as output

    checkpoint = str(SAMPLES / "spark-4.3" / "agg-rocks")
    whole, grouped = tmp_path / "whole.parquet", tmp_path / "grouped.parquet"
    _state(capsys, checkpoint, "--format", "parquet", "-o", str(whole))
    monkeypatch.setattr(output, "ROW_GROUP_ROWS", 3)
    _state(capsys, checkpoint, "--format", "parquet", "-o", str(grouped))
    rows = pq.read_table(whole)
    assert rows.num_rows > 6
    assert pq.ParquetFile(grouped).metadata.num_row_groups >= rows.num_rows // 3
    assert pq.read_table(grouped).equals(rows)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grouped.parquet", "whole.parquet"]
