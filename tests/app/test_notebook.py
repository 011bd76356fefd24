"""The notebook API: ``stateglass.connect`` and ``stateglass.read_state``.

The state a session returns is the state ``stateglass state`` reads; hostile statements are
refused with one line, as on the command line, and write nothing.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stateglass
from stateglass.app.cli import main
from stateglass.app.errors import AppError
from stateglass.collectors.errors import CollectorError, SqlError
from tests.app.test_sql_cli import HOSTILE
from tests.conftest import SAMPLES

ROOT = SAMPLES / "spark-4.3"
SESSIONS = ROOT / "session-rocks-cl"
TWS = ROOT / "tws-rocks-cl"


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.chdir(tmp_path)  # a statement that wrote a file would leave it here
    with stateglass.connect(str(ROOT), time_limit=3) as opened:
        yield opened


def _parquet_state(tmp_path: Path, checkpoint: Path, *pick: str) -> pa.Table:
    out = tmp_path / "state.parquet"
    assert main(["state", str(checkpoint), *pick, "--format", "parquet", "-o", str(out)]) == 0
    table = pq.read_table(out)
    out.unlink()
    return table


def _rows(table: pa.Table) -> list[str]:
    """Rows comparable across zone names (DuckDB gives UTC back as ``Etc/UTC``)."""

    def text(v: Any) -> str:
        return v.isoformat() if hasattr(v, "isoformat") else str(v)

    return sorted(json.dumps(row, default=text, sort_keys=True) for row in table.to_pylist())


def _state_table(session: Any, checkpoint: Path, **fields: object) -> str:
    (entry,) = [
        e
        for e in session.tables()
        if e.checkpoint == str(checkpoint)
        and e.kind == "state"
        and all(getattr(e, k) == v for k, v in fields.items())
    ]
    return f"{entry.schema}.{entry.table}"


def test_the_api_is_named_at_the_top() -> None:
    assert stateglass.__all__ == ["connect", "read_state"]
    assert stateglass.connect.__doc__ and stateglass.read_state.__doc__
    with pytest.raises(AttributeError):
        _ = stateglass.no_such_thing  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "pick",
    [
        pytest.param({}, id="last batch"),
        pytest.param({"batch_id": 1}, id="batch 1"),
        pytest.param({"state_var": "by_kind"}, id="tws map"),
        pytest.param({"read_timers": True}, id="tws timers"),
    ],
)
def test_read_state_is_state_parquet(pick: dict[str, Any], tmp_path: Path) -> None:
    checkpoint = TWS if ("state_var" in pick or "read_timers" in pick) else SESSIONS
    flags = []
    if "batch_id" in pick:
        flags += ["--batch-id", str(pick["batch_id"])]
    if "state_var" in pick:
        flags += ["--state-var", pick["state_var"]]
    if pick.get("read_timers"):
        flags += ["--read-timers"]
    got = stateglass.read_state(str(checkpoint), **pick)
    expected = _parquet_state(tmp_path, checkpoint, *flags)
    assert got.schema == expected.schema
    assert _rows(got) == _rows(expected) and got.num_rows > 0


def test_read_state_errors_are_one_line() -> None:
    with pytest.raises(CollectorError) as caught:
        stateglass.read_state(str(SESSIONS), batch_id=999)
    assert "\n" not in str(caught.value) and "999" in str(caught.value)


def test_a_relation_gives_pandas_and_arrow(session: Any, tmp_path: Path) -> None:
    table = _state_table(session, SESSIONS, store_name="default")
    relation = session.sql(f"SELECT key, value, partition_id FROM {table}")
    frame = relation.df()
    arrow = relation.arrow()
    arrow = arrow.read_all() if isinstance(arrow, pa.RecordBatchReader) else arrow
    assert len(frame) == arrow.num_rows > 0
    expected = _parquet_state(tmp_path, SESSIONS)
    assert _rows(arrow) == _rows(expected)


def test_polars_missing_is_one_line_naming_it(
    session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # polars is no dependency; an entry of None makes its import fail as if not installed.
    monkeypatch.setitem(sys.modules, "polars", None)
    relation = session.sql("SELECT 1 AS one")
    with pytest.raises(AppError) as caught:
        relation.pl()
    assert str(caught.value) == "Result.pl() needs polars: pip install polars"


def test_catalog_lists_without_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    from stateglass.collectors.checkpoints.state_reader import StateSource

    def refused(*_: object, **__: object) -> None:
        raise AssertionError("a store was decoded to list the catalog")

    for reads in ("tables", "merged_tables", "load_items", "load", "changes"):
        monkeypatch.setattr(StateSource, reads, refused)
    with stateglass.connect(str(ROOT)) as opened:
        entries = opened.tables()
        assert {e.kind for e in entries} >= {"state", "changes", "metadata", "timers"}
        with pytest.raises(CollectorError, match="a store was decoded"):
            opened.sql("SELECT count(*) FROM agg_hdfs.op0_default").arrow()


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_statements_are_refused(session: Any, query: str, tmp_path: Path) -> None:
    with pytest.raises(SqlError) as caught:
        relation = session.sql(query)
        relation.arrow()
    assert "\n" not in str(caught.value)
    assert os.listdir(tmp_path) == []
