"""`stateglass sql` prints every value DuckDB can make: a time with an offset keeps it (DuckDB's
text of it), in the dashboard's results and Parquet files too.
"""

from __future__ import annotations

from stateglass.collectors.catalog import SqlSession
from tests.app.test_sql_cli import ROOT

AGG = ROOT / "agg-hdfs"


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
