"""Progress ingestion end to end: a real windowed aggregation with a watermark and late rows,
run with Spark 4.3's event-log defaults (rolling, zstd) and the StateGlass listener,
restarted once.

``stateglass collect --progress EVENTLOG_DIR`` must give, batch for batch, the numbers of the
query's own ``recentProgress``; the listener's directory must give the same tables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.cli import main
from stateglass.collectors.db.read import read_query

pytestmark = pytest.mark.slow

STATE_COLUMNS = (
    "num_rows_total",
    "num_rows_dropped_by_watermark",
    "memory_used_bytes",
    "num_rows_updated",
    "num_rows_removed",
    "commit_time_ms",
    "num_state_store_instances",
    "custom_metrics",
    "rocksdb_bytes_copied",
    "rocksdb_files_reused",
    "snapshot_last_uploaded",
)


def _collect(tmp_path: Path, run: Path, progress_dir: str, name: str) -> str:
    db = str(tmp_path / f"{name}.duckdb")
    argv = ["collect", str(run / "checkpoint"), "--db", db, "--progress", str(run / progress_dir)]
    assert main(argv) == 0
    return db


@pytest.fixture(scope="module")
def dbs(progress_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("progress-dbs")
    return {
        "eventlog": _collect(tmp, progress_run, "eventlog", "eventlog"),
        "listener": _collect(tmp, progress_run, "listener", "listener"),
    }


def _oracle(run: Path) -> dict[tuple[str, int], dict[str, Any]]:
    recent = json.loads((run / "recent_progress.json").read_text())
    return {(p["runId"], p["batchId"]): p for p in recent}


def test_the_event_log_is_spark_4_defaults(progress_run: Path) -> None:
    dirs = list((progress_run / "eventlog").iterdir())
    assert [d.name.startswith("eventlog_v2_") for d in dirs] == [True]
    assert any(f.name.endswith(".zstd") for f in dirs[0].iterdir())


def test_eventlog_matches_recent_progress_batch_for_batch(
    progress_run: Path, dbs: dict[str, str]
) -> None:
    oracle = _oracle(progress_run)
    rows = read_query(
        dbs["eventlog"],
        "SELECT run_id, batch_id, num_input_rows, query_id, source FROM progress",
    )
    assert {(r[0], r[1]) for r in rows} == set(oracle)
    for run_id, batch_id, num_input_rows, query_id, source in rows:
        expected = oracle[(run_id, batch_id)]
        assert num_input_rows == expected["numInputRows"]
        assert query_id == expected["id"] and source == "eventlog"
    states = read_query(
        dbs["eventlog"],
        "SELECT run_id, batch_id, operator_index, operator_name, num_rows_total, "
        "num_rows_dropped_by_watermark, memory_used_bytes FROM progress_state",
    )
    assert len(states) == sum(len(p["stateOperators"]) for p in oracle.values())
    for run_id, batch_id, index, name, total, dropped, memory in states:
        op = oracle[(run_id, batch_id)]["stateOperators"][index]
        assert (name, total, dropped, memory) == (
            op["operatorName"],
            op["numRowsTotal"],
            op["numRowsDroppedByWatermark"],
            op["memoryUsedBytes"],
        )
    # Late rows were really dropped, and two runs of the one query are kept.
    assert sum(s[5] for s in states) > 0
    assert len({r[0] for r in rows}) == 2 and len({r[3] for r in rows}) == 1


def test_listener_gives_the_same_tables(dbs: dict[str, str]) -> None:
    progress_sql = (
        "SELECT query_id, run_id, batch_id, name, timestamp, batch_duration_ms, num_input_rows, "
        "duration_ms, duration_add_batch_ms, duration_trigger_execution_ms, "
        "event_time_watermark, event_time, num_sources, sink FROM progress "
        "ORDER BY run_id, batch_id"
    )
    state_sql = (
        f"SELECT query_id, run_id, batch_id, operator_index, {', '.join(STATE_COLUMNS)} "
        "FROM progress_state ORDER BY run_id, batch_id, operator_index"
    )
    for sql in (progress_sql, state_sql):
        from_log = read_query(dbs["eventlog"], sql)
        assert from_log and from_log == read_query(dbs["listener"], sql)
    runs_sql = "SELECT query_id, run_id, name, started_at FROM progress_runs ORDER BY run_id"
    assert len(read_query(dbs["eventlog"], runs_sql)) == 2
    assert read_query(dbs["eventlog"], runs_sql) == read_query(dbs["listener"], runs_sql)
    # Rates: the event log has Spark's doubles, the listener's JSON rounds them to 0.1.
    rates = "SELECT run_id, batch_id, input_rows_per_second FROM progress ORDER BY 1, 2"
    for (_, _, exact), (_, _, rounded) in zip(
        read_query(dbs["eventlog"], rates), read_query(dbs["listener"], rates), strict=True
    ):
        assert exact is None or abs(exact - rounded) <= 0.05 + 1e-9


def test_progress_joins_the_checkpoint_by_query_id(progress_run: Path, dbs: dict[str, str]) -> None:
    joined = read_query(
        dbs["eventlog"],
        "SELECT DISTINCT c.checkpoint FROM progress p JOIN checkpoints c USING (query_id)",
    )
    assert joined == [(str(progress_run / "checkpoint"),)]


def test_recollecting_never_duplicates(progress_run: Path, dbs: dict[str, str]) -> None:
    tables = ("progress", "progress_state", "progress_snapshot_uploads", "progress_runs")
    before = {t: read_query(dbs["eventlog"], f"SELECT count(*) FROM {t}")[0][0] for t in tables}
    for directory in ("eventlog", "listener"):
        argv = ["collect", str(progress_run / "checkpoint"), "--db", dbs["eventlog"]]
        assert main([*argv, "--progress", str(progress_run / directory)]) == 0
    after = {t: read_query(dbs["eventlog"], f"SELECT count(*) FROM {t}")[0][0] for t in tables}
    assert after == before and before["progress_snapshot_uploads"] > 0
