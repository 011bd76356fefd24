"""The SQL session: names, laziness (what a query decodes), freshness, one-line errors that say
what ``stateglass state`` says, and the safety switches, on real sample checkpoints.

These guard the duckdb 2.0 behaviour the catalog stands on (docs/design/sql-catalog.md): the
Dataset ``scanner()`` hook with pushed filters, pull-only readers, locked configuration.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from stateglass.app.cli import main as cli_main
from stateglass.collectors.catalog import SqlLimits, SqlSession
from stateglass.collectors.catalog.names import schema_names
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.errors import (
    CorruptFile,
    MissingVersion,
    NotFound,
    QueryFailed,
    QueryMemoryLimit,
    QueryRefused,
    QueryTimeLimit,
)
from tests.conftest import SAMPLES, copy_checkpoint, copy_until

AGG = SAMPLES / "spark-3.5" / "agg-hdfs"  # 4 partitions, batches 0..11, snapshots at 3, 6, 9, 12
TWS = SAMPLES / "spark-4.3" / "tws-rocks-cl"
STATE = "agg_hdfs.op0_default"


def test_schema_names_follow_the_rule() -> None:
    names = schema_names(
        [
            "/a/Orders-v2",
            "s3://b/x/orders_v2",
            "/c/history",
            "/d/7days",
            "/e/-",
            "/f/ck.dots",
            "/jobs/orders/checkpoint",
            "/jobs/clicks/checkpoint",
            "/g/a-b",
            "/g/a_b",
        ]
    )
    assert names == {
        "/a/Orders-v2": "a_orders_v2",
        "s3://b/x/orders_v2": "x_orders_v2",
        "/c/history": "history_cp",
        "/d/7days": "cp_7days",
        "/e/-": "cp",
        "/f/ck.dots": "ck_dots",
        "/jobs/orders/checkpoint": "orders_checkpoint",
        "/jobs/clicks/checkpoint": "clicks_checkpoint",
        "/g/a-b": "g_a_b",
        "/g/a_b": "g_a_b_2",
    }


def test_tables_list_every_view_and_kind() -> None:
    with SqlSession([str(TWS), str(AGG)]) as session:
        entries = session.tables()
        listed = session.execute('SELECT "schema", "table", kind FROM stateglass.tables').table
    kinds = {(e.schema, e.table): e.kind for e in entries}
    assert kinds[("agg_hdfs", "op0_default")] == "state"
    assert kinds[("agg_hdfs", "op0_default_changes")] == "changes"
    assert kinds[("agg_hdfs", "state_metadata")] == "metadata"
    assert kinds[("tws_rocks_cl", "op0_timers")] == "timers"
    tws_vars = {e.state_var for e in entries if e.schema == "tws_rocks_cl" and e.kind == "state"}
    assert None not in tws_vars and len(tws_vars) >= 2
    assert all(e.checkpoint == str(AGG) for e in entries if e.schema == "agg_hdfs")
    assert listed.num_rows == len(entries)


def test_listing_decodes_nothing(tmp_path: Path) -> None:
    # Every state file garbled: the catalog still lists, and only a query meets the damage.
    cp = copy_checkpoint(AGG, tmp_path / "agg-hdfs")
    for f in cp.glob("state/0/*/*.*"):
        f.write_bytes(b"not a state file")
    with SqlSession([str(cp)]) as session:
        assert ("agg_hdfs", "op0_default") in {(e.schema, e.table) for e in session.tables()}
        assert session.columns("agg_hdfs", "op0_default")[-2:] == [
            ("partition_id", "INTEGER"),
            ("batch_id", "BIGINT"),
        ]
        with pytest.raises(CorruptFile):
            session.execute(f"SELECT count(*) FROM {STATE}")


def test_a_partition_predicate_decodes_only_that_partition() -> None:
    with SqlSession([str(AGG)]) as session:
        session.execute(f"SELECT * FROM {STATE} WHERE partition_id = 2")
        assert [(d.partition, d.batch_id) for d in session.last_decoded] == [(2, 11)]
        session.execute(f"SELECT * FROM {STATE} WHERE partition_id IN (1, 3) AND batch_id = 4")
        assert sorted((d.partition, d.batch_id) for d in session.last_decoded) == [(1, 4), (3, 4)]
        session.execute(f"SELECT count(*) FROM {STATE}")
        assert len(session.last_decoded) == 4


def test_limit_decodes_one_partition() -> None:
    with SqlSession([str(AGG)]) as session:
        result = session.execute(f"SELECT * FROM {STATE} WHERE batch_id >= 0 LIMIT 1")
        assert result.table.num_rows == 1
        assert len(session.last_decoded) == 1


def test_a_new_commit_is_seen_by_the_next_query(tmp_path: Path) -> None:
    cp = copy_until(AGG, tmp_path / "agg-hdfs", 5)
    with SqlSession([str(cp)]) as session:
        first = session.execute(f"SELECT DISTINCT batch_id FROM {STATE}").table
        assert first.column("batch_id").to_pylist() == [4]
        shutil.copytree(AGG, cp, dirs_exist_ok=True)
        again = session.execute(f"SELECT DISTINCT batch_id FROM {STATE}").table
        assert again.column("batch_id").to_pylist() == [11]


def _cached(session: SqlSession) -> list[tuple[int, int, bool]]:
    return sorted((d.partition, d.batch_id, d.cached) for d in session.last_decoded)


def test_a_second_query_takes_decoded_partitions_from_the_cache() -> None:
    with SqlSession([str(AGG)]) as session:
        first = session.execute(f"SELECT * FROM {STATE}").table
        assert _cached(session) == [(p, 11, False) for p in range(4)]
        again = session.execute(f"SELECT * FROM {STATE} WHERE value.count > 0").table
        assert _cached(session) == [(p, 11, True) for p in range(4)]
        assert again.num_rows == first.num_rows > 0
        assert again.sort_by("partition_id").equals(first.sort_by("partition_id"))
        assert 0 < session.decoded.held <= session.limits.cache_bytes


def test_a_query_needing_more_columns_than_the_cached_decode_decodes_again() -> None:
    # A narrow query decodes only the value; a later SELECT * must not get its partial rows.
    with SqlSession([str(AGG)]) as session:
        session.execute(f"SELECT max(value.count) FROM {STATE}")
        whole = session.execute(f"SELECT * FROM {STATE}").table
        assert _cached(session) == [(p, 11, False) for p in range(4)]
    with SqlSession([str(AGG)]) as fresh:
        expected = fresh.execute(f"SELECT * FROM {STATE}").table
    assert whole.sort_by("partition_id").equals(expected.sort_by("partition_id"))


def test_the_cache_keeps_no_more_than_its_bound() -> None:
    with SqlSession([str(AGG)], limits=SqlLimits(cache_bytes=0)) as session:
        for _ in range(2):
            session.execute(f"SELECT * FROM {STATE}")
            assert _cached(session) == [(p, 11, False) for p in range(4)]
        assert session.decoded.held == 0
    with SqlSession([str(AGG)], limits=SqlLimits(cache_bytes=1)) as session:
        session.execute(f"SELECT * FROM {STATE}")
        session.execute(f"SELECT * FROM {STATE}")
        assert _cached(session) == [(p, 11, False) for p in range(4)]


def test_a_new_commit_is_never_answered_from_the_cache(tmp_path: Path) -> None:
    cp = copy_until(AGG, tmp_path / "agg-hdfs", 5)
    with SqlSession([str(cp)]) as session, SqlSession([str(AGG)]) as fresh:
        session.execute(f"SELECT * FROM {STATE}")
        session.execute(f"SELECT * FROM {STATE}")
        assert _cached(session) == [(p, 4, True) for p in range(4)]
        shutil.copytree(AGG, cp, dirs_exist_ok=True)
        last = session.execute(f"SELECT * FROM {STATE}").table
        assert _cached(session) == [(p, 11, False) for p in range(4)]
        expected = fresh.execute(f"SELECT * FROM {STATE}").table
        assert last.sort_by("partition_id").equals(expected.sort_by("partition_id"))


def test_a_rewritten_file_is_decoded_again(tmp_path: Path) -> None:
    cp = copy_until(AGG, tmp_path / "agg-hdfs", 5)
    with SqlSession([str(cp)]) as session:
        session.execute(f"SELECT * FROM {STATE}")
        # Same name, other identity: what a file written again leaves.
        delta = cp / "state" / "0" / "2" / "5.delta"
        os.utime(delta, (delta.stat().st_atime, delta.stat().st_mtime + 10))
        session.execute(f"SELECT * FROM {STATE}")
        assert _cached(session) == [(0, 4, True), (1, 4, True), (2, 4, False), (3, 4, True)]


def _state_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert cli_main(["state", *args]) == 2
    return capsys.readouterr().err.strip()


def test_an_uncommitted_batch_says_what_state_says(capsys: pytest.CaptureFixture[str]) -> None:
    said = _state_error([str(AGG), "--batch-id", "999"], capsys)
    with SqlSession([str(AGG)]) as session, pytest.raises(NotFound) as err:
        session.execute(f"SELECT * FROM {STATE} WHERE batch_id = 999")
    assert str(err.value) in said


def test_a_purged_batch_says_what_state_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cp = copy_checkpoint(AGG, tmp_path / "agg-hdfs")
    for f in cp.glob("state/0/*/[12].delta"):
        f.unlink()
    said = _state_error([str(cp), "--batch-id", "0"], capsys)
    with SqlSession([str(cp)]) as session:
        with pytest.raises(MissingVersion) as err:
            session.execute(f"SELECT * FROM {STATE} WHERE batch_id = 0")
        assert "purged" in str(err.value) and str(err.value) in said
        # A range reads the retained batches in it.
        kept = session.execute(f"SELECT DISTINCT batch_id FROM {STATE} WHERE batch_id < 4")
        assert sorted(kept.table.column("batch_id").to_pylist()) == [2, 3]


HOSTILE = [
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "COPY (SELECT 1) TO 'x.csv'",
    "ATTACH 'x.db' AS x",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET memory_limit = '100GB'",
    "SET enable_external_access = true",
    "PRAGMA threads = 8",
    "RESET lock_configuration",
    "EXPORT DATABASE 'out'",
    "SELECT * FROM read_csv('https://example.com/x.csv')",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_statements_are_refused_and_write_nothing(
    sql: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    with SqlSession([str(AGG)]) as session:
        with pytest.raises(QueryRefused) as err:
            session.execute(sql)
        assert "\n" not in str(err.value)
        assert session.execute("SELECT 42 AS x").table.column("x").to_pylist() == [42]
    assert os.listdir(work) == []


def test_a_history_attached_read_only_refuses_writes(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    assert cli_main(["collect", str(AGG), "--db", str(db)]) == 0
    with SqlSession([str(AGG)], history=str(db)) as session:
        kinds = {e.kind for e in session.tables()}
        assert "history" in kinds
        with pytest.raises(QueryRefused):
            session.execute("CREATE TABLE history.main.x AS SELECT 1")
        with pytest.raises(QueryRefused):
            session.execute("ATTACH '" + str(db) + "' AS h2")


def test_a_copied_history_leaves_the_collector_free(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    assert cli_main(["collect", str(AGG), "--db", str(db)]) == 0
    with SqlSession([str(AGG)], history=str(db), copy_history=True) as session:
        assert cli_main(["collect", str(TWS), "--db", str(db)]) == 0  # would wait 60 s if held
        assert session.execute("SELECT count(*) AS n FROM history.checkpoints").table


def test_a_query_that_never_ends_stops_at_the_time_limit() -> None:
    limits = SqlLimits(time_s=1.0)
    with SqlSession([str(AGG)], limits=limits) as session:
        with pytest.raises(QueryTimeLimit):
            session.execute(
                "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                "SELECT max(n) FROM r"
            )
        # Every retained batch of the store, seven times over: decoding and joining both
        # outlast the limit.
        sides = [f"(SELECT * FROM {STATE} WHERE batch_id >= 0) t{n}" for n in range(7)]
        with pytest.raises(QueryTimeLimit):
            session.execute(f"SELECT count(*) FROM {', '.join(sides)}")
        # Rows already streaming when the limit comes: DuckDB's interrupt comes through Arrow.
        with pytest.raises(QueryTimeLimit):
            session.execute(f"SELECT a.key, h.range FROM {STATE} a, range(1000000000) h")
        assert session.execute("SELECT 1 AS x").table.num_rows == 1


def test_a_query_past_the_memory_limit_stops() -> None:
    limits = SqlLimits(memory_bytes=64 << 20, temp_bytes=0)
    with SqlSession([str(AGG)], limits=limits) as session, pytest.raises(QueryMemoryLimit):
        session.execute("SELECT string_agg(repeat('x', 1000), ',') FROM range(1000000)")


def test_a_bad_query_is_one_line() -> None:
    with SqlSession([str(AGG)]) as session:
        for sql in ("SELEC 1", "SELECT * FROM agg_hdfs.nope", "SELECT nope FROM " + STATE):
            with pytest.raises(QueryFailed) as err:
                session.execute(sql)
            assert "\n" not in str(err.value)


def test_metadata_tables_describe_the_checkpoint() -> None:
    with SqlSession([str(AGG)]) as session:
        meta = session.execute("SELECT * FROM agg_hdfs.state_metadata").table.to_pylist()
        batches = session.execute("SELECT count(*) AS n FROM agg_hdfs.batches").table
        commits = session.execute("SELECT max(batch_id) AS b FROM agg_hdfs.commits").table
    assert meta == [
        {
            "operatorId": 0,
            "operatorName": meta[0]["operatorName"],
            "stateStoreName": "default",
            "numPartitions": 4,
            "minBatchId": 0,
            "maxBatchId": 11,
        }
    ]
    assert batches.column("n").to_pylist() == [12]
    assert commits.column("b").to_pylist() == [11]


def test_a_stream_read_in_part_leaves_the_session_usable() -> None:
    with SqlSession([str(AGG)]) as session:
        with session.stream("SELECT * FROM range(1000000000)") as reader:
            assert reader.read_next_batch().num_rows > 0
        assert session.execute("SELECT 1 AS x").table.column("x").to_pylist() == [1]


def test_stores_named_by_their_folders_are_those_the_metadata_names() -> None:
    # A fleet on an object store lists its tables from folder names alone (no file read):
    # they must be the stores the metadata names, or None where they cannot be.
    samples = sorted(p for p in SAMPLES.glob("spark-*/*") if (p / "metadata").is_file())
    assert len(samples) >= 10
    for sample in samples:
        cp = Checkpoint(str(sample))
        stores = cp.stores()
        from_folders = cp.stores_from_folders()
        if any(s.is_transform_with_state or s.uses_column_families for s in stores):
            assert from_folders is None, sample
        else:
            assert from_folders == [(s.operator_id, s.store_name) for s in stores], sample
