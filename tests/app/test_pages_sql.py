"""AppTest of the SQL page: a query's rows, paging, the URL that holds the query, examples
with the selected checkpoint's real names, refusals as one line, and the links into it."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app.dashboard.sql_link import QUERY_PARAM, sql_url
from stateglass.app.dashboard.views.sql import TIME_LIMIT_ENV, csv_bytes, parquet_bytes
from tests.app.test_pages_core import TIMEOUT_S, _page, run_page
from tests.app.test_sql_cli import HOSTILE
from tests.conftest import SAMPLES

RANGE = "SELECT n, n * n AS square FROM range(120) AS t(n) ORDER BY n"


def _result(at: AppTest) -> Any:
    """The result's grid: the last one (the catalog's columns come first)."""
    assert len(at.dataframe) == 2, len(at.dataframe)
    return at.dataframe[-1]


def _submit(at: AppTest, query: str) -> AppTest:
    at.text_area(key="sg_sql_text").input(query)
    (run,) = [b for b in at.button if b.label == "Run"]
    run.click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_query_shows_its_rows_a_page_at_a_time_and_goes_into_the_url(samples_db: str) -> None:
    at = run_page("sql")
    assert [t.value for t in at.title] == ["SQL"]
    _submit(at, RANGE)
    assert not at.error, [e.value for e in at.error]
    assert any("**120** row(s)" in c.value for c in at.caption)
    grid = _result(at)
    assert len(grid.value) == 50 and list(grid.value["n"][:3]) == [0, 1, 2]
    assert at.query_params[QUERY_PARAM] == RANGE
    at.number_input[0].set_value(3).run()
    grid = _result(at)
    assert list(grid.value["n"]) == list(range(100, 120))
    # Both numeric columns can be drawn: one chart.
    assert len(at.get("plotly_chart")) == 1


def test_the_url_restores_the_query_and_runs_it(samples_db: str) -> None:
    at = AppTest.from_function(_page, args=("sql",), default_timeout=TIMEOUT_S)
    at.query_params[QUERY_PARAM] = "SELECT 42 AS answer"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.text_area(key="sg_sql_text").value == "SELECT 42 AS answer"
    grid = _result(at)
    assert list(grid.value["answer"]) == [42]


@pytest.mark.parametrize(
    ("where", "noted"),
    [
        pytest.param("WHERE batch_id = 1.0", True, id="a decimal picks no batch"),
        pytest.param("WHERE batch_id = 1", False, id="an integer picks it"),
    ],
)
def test_a_batch_id_comparison_that_picks_no_batch_is_noted(
    samples_db: str, where: str, noted: bool
) -> None:
    # The note `stateglass sql` prints on stderr, under the result.
    at = _submit(run_page("sql"), f"SELECT count(*) AS n FROM healthy.op0_default {where}")
    assert not at.error, [e.value for e in at.error]
    assert len(_result(at).value) == 1
    notes = [i.value for i in at.info]
    if noted:
        (note,) = notes
        assert note.startswith("no batch was picked for healthy.op0_default (batch "), note
        assert "integer constant" in note
    else:
        assert notes == []


def test_a_time_of_day_shows_as_duckdb_prints_it(samples_db: str) -> None:
    query = (
        "SELECT TIME '24:00:00' AS t, '12:34:56.123456789'::TIME_NS AS n, "
        "['24:00:00'::TIME] AS l, {'at': '23:59:59.999999999'::TIME_NS, 'k': 1} AS s"
    )
    grid = _result(_submit(run_page("sql"), query)).value
    assert grid.iloc[0].to_dict() == {
        "t": "24:00:00",
        "n": "12:34:56.123456789",
        "l": '["24:00:00"]',  # nested: the column as `stateglass sql --format csv` prints it
        "s": '{"at":"23:59:59.999999999","k":1}',
    }


def test_the_catalog_is_listed_beside_the_editor(samples_db: str) -> None:
    at = run_page("sql")
    (schema,) = [s for s in at.selectbox if s.label == "Schema"]
    assert "healthy" in schema.options and "history" in schema.options
    # It opens on the sidebar checkpoint's schema (the first sample, demo/healthy).
    assert schema.value == "healthy"
    tables = at.selectbox(key="sg_sql_table:healthy").options
    assert "op0_default" in tables and "op0_default_changes" in tables
    at.selectbox(key="sg_sql_table:healthy").set_value("op0_default").run()
    columns = at.dataframe[0].value
    assert {"key", "value", "partition_id", "batch_id"} <= set(columns["column"])


# Every seven-way join of a store with itself and a billion-row range: decoding and joining
# outlast the limit.
CROSS_JOIN = (
    "SELECT count(*) FROM "
    + ", ".join(f"healthy.op0_default t{n}" for n in range(7))
    + ", range(1000000000) r"
)


@pytest.mark.parametrize(
    "query",
    [
        *HOSTILE,
        pytest.param(CROSS_JOIN, id="cross-join"),
        pytest.param("SELECT * FROM no_such_table", id="unknown-table"),
        pytest.param("SELEC 1", id="syntax"),
    ],
)
def test_a_refused_or_bad_query_is_one_line(
    samples_db: str, query: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(TIME_LIMIT_ENV, "3")  # the endless ones stop soon
    at = _submit(run_page("sql"), query)
    (error,) = at.error
    assert "\n" not in error.value and "Traceback" not in error.value
    assert len(at.dataframe) == 1  # the catalog's columns, no result
    assert list(tmp_path.iterdir()) == []


def test_an_example_fills_the_editor_with_real_names_and_runs(samples_db: str) -> None:
    at = run_page("sql")
    picker = at.selectbox(key="sg_sql_example")
    biggest = [t for t in picker.options if t.endswith("the 20 biggest values")]
    assert biggest, picker.options
    picker.set_value(biggest[0]).run()
    text = at.text_area(key="sg_sql_text").value
    assert '."op0_default"' in text and "ORDER BY value_chars DESC" in text
    _submit(at, text)
    assert not at.error, [e.value for e in at.error]
    assert len(at.dataframe) == 2


# Every kind of cell a result holds: state columns (a struct of a window, a binary
# aggregate) beside a decimal, a timestamp, a float and nested literals.
EVERY_CELL = (
    "SELECT key, value.max_3 AS b, 123.45::DECIMAL(5, 2) AS d, "
    "TIMESTAMPTZ '2024-01-01 00:46:02+00' AS ts, 0.938::FLOAT AS f, "
    "{'a': 1, 'b': 'y,z'} AS s, [1, 2] AS l, MAP {'k': 'v'} AS m "
    "FROM agg_hdfs.op0_default ORDER BY key"
)


def test_the_csv_download_is_what_stateglass_sql_writes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from stateglass.app.cli import main
    from stateglass.app.render.arrow_values import spark_text
    from stateglass.collectors.catalog import SqlSession

    agg = str(SAMPLES / "spark-4.3" / "agg-hdfs")
    # Opened as the page opens its session.
    with SqlSession([agg], text_form=spark_text()) as session:
        table = session.execute(EVERY_CELL, max_rows=100).table
    assert main(["sql", agg, "-e", EVERY_CELL, "--format", "csv"]) == 0
    cli = capsys.readouterr().out
    assert csv_bytes(table).decode() == cli
    rows = list(csv.DictReader(io.StringIO(cli)))
    assert len(rows) == table.num_rows > 3
    first = rows[0]
    # Spark's forms: base64 binary, an unquoted decimal, a timestamp in UTC, a float's
    # shortest text, a struct a column per field, lists and maps as JSON.
    assert first["b"] == "AAADiw==" and first["d"] == "123.45" and first["f"] == "0.938"
    assert first["ts"] == "2024-01-01T00:46:02.000Z"
    assert first["key.window.start"] == "2024-01-01T00:40:00.000Z"
    assert (first["s.a"], first["s.b"], first["l"], first["m"]) == (
        "1",
        "y,z",
        "[1,2]",
        '{"k":"v"}',
    )


def test_the_parquet_download_keeps_every_type() -> None:
    table = pa.table(
        {
            "key": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y,z"}]),
            "n": pa.array([1, 2], type=pa.int64()),
        }
    )
    assert pq.read_table(io.BytesIO(parquet_bytes(table))).equals(table)


def test_the_url_holds_the_query_encoded() -> None:
    assert sql_url("SELECT 'a b' & 1") == "sql?q=SELECT+%27a+b%27+%26+1"


def test_health_state_and_browse_link_into_the_page_with_queries_that_run(
    samples_db: str,
) -> None:
    from stateglass.collectors.catalog import SqlSession
    from stateglass.collectors.db.read import read_query

    queries = {}
    for name in ("health", "state", "browse"):
        at = run_page(name)
        links = at.get("page_link")
        assert len(links) == 1, name
        queries[name] = links[0].proto.query_string
    assert "epoch_ms" in _query(queries["health"])
    roots = [r[0] for r in read_query(samples_db, "SELECT checkpoint FROM checkpoints")]
    with SqlSession(roots, history=samples_db, copy_history=True) as session:
        for query in queries.values():
            session.execute(_query(query), max_rows=10)  # raises on a bad query


def _query(query_string: str) -> str:
    from urllib.parse import parse_qs

    return parse_qs(query_string)[QUERY_PARAM][0]
