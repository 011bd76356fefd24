"""One policy for a database that is not there, not ours, or written by an older StateGlass:
pages, the health rules, ``/metrics`` and ``export`` read it the same way, and say so in the
same words (``collectors/db/schema_versions.py``, ``collectors/db/connection.py``)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from stateglass.app import queries
from stateglass.app.analysis.health import evaluate
from stateglass.app.cli import main
from stateglass.app.metrics import HEALTH_GAUGE, UP_GAUGE, HistoryCollector
from stateglass.app.report.model import load_report
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.schema import COLUMNS, KEYS, TABLES
from stateglass.collectors.db.schema_versions import SCHEMA_VERSION
from stateglass.collectors.db.writer import Database
from stateglass.collectors.errors import NoDatabase, NotAStateGlassDatabase, OlderDatabase
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import SAMPLES

AGG = str(SAMPLES / "spark-4.3" / "agg-hdfs")
# What an older StateGlass had not yet: these tables, and a column of three others.
NEWER_TABLES = (
    "sst_refs",
    "temp_files",
    "schema_files",
    "progress",
    "progress_state",
    "progress_snapshot_uploads",
    "progress_runs",
    "progress_files",
    "eviction_rules",
    "eviction_audit",
)
NEWER_COLUMNS = (
    ("checkpoints", "pinned_conf"),
    ("state_versions", "sst_files_live"),
    ("health_judged", "clock_facts"),
)
UPGRADE = "; run `stateglass collect` once to upgrade it"


def test_keys_and_column_types_are_those_duckdb_reads_from_the_ddl(tmp_path: Path) -> None:
    db = str(tmp_path / "h.duckdb")
    Database(db)
    keys = read_query(
        db,
        "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
        "WHERE constraint_type = 'PRIMARY KEY'",
    )
    assert {table: tuple(names) for table, names in keys} == KEYS
    found: dict[str, dict[str, str]] = {}
    for table, column, sql_type in read_query(
        db,
        "SELECT c.table_name, c.column_name, c.data_type FROM duckdb_columns() c "
        "JOIN duckdb_tables() t USING (table_oid) ORDER BY c.column_index",
    ):
        found.setdefault(table, {})[column] = sql_type
    assert found == COLUMNS
    assert set(COLUMNS) == set(TABLES)


@pytest.fixture(scope="module")
def older(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A collected checkpoint's database as schema 1 left it: no tables and columns of later
    versions, and nothing upgraded since."""
    db = str(tmp_path_factory.mktemp("older") / "h.duckdb")
    scan_checkpoint(Database(db), AGG)
    with duckdb.connect(db) as conn:
        for table in NEWER_TABLES:
            conn.execute(f"DROP TABLE {table}")
        for table, column in NEWER_COLUMNS:
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        conn.execute("UPDATE schema_info SET version = 1")
    return db


def test_pages_read_an_older_database_with_what_it_lacks_empty(older: str) -> None:
    assert read_query(older, "SELECT count(*), count(pinned_conf) FROM checkpoints") == [(1, 0)]
    assert read_query(older, "SELECT count(*) FROM temp_files") == [(0,)]
    assert read_query(older, "SELECT count(sst_files_live) FROM state_versions") == [(0,)]
    assert len(queries.checkpoint_overview(older)) == 1
    assert queries.progress(older, AGG).empty
    assert queries.eviction_audit(older, AGG, 0, "default").empty
    # The reader made nothing in the file: a writer still finds it as it was.
    with duckdb.connect(older, read_only=True) as conn:
        assert conn.execute("SELECT max(version) FROM schema_info").fetchall() == [(1,)]
        names = {r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert names.isdisjoint(NEWER_TABLES)


def test_rules_and_export_need_what_it_lacks_and_say_so_in_one_line(
    older: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    by = f"written by an older StateGlass (schema 1, this release writes {SCHEMA_VERSION})"
    with pytest.raises(OlderDatabase) as judged:
        evaluate(older, AGG)
    assert str(judged.value) == (
        f"{older}: {by}, and has no 'sst_refs', 'temp_files', 'schema_files' and 7 more yet"
        + UPGRADE
    )
    out = tmp_path / "t.csv"
    assert main(["export", "--db", older, "--table", "temp_files", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"stateglass: error: {older}: {by}, and has no 'temp_files' yet{UPGRADE}\n"
    )
    assert not out.exists()
    # What it has exports as ever.
    assert main(["export", "--db", older, "--table", "batches", "-o", str(out)]) == 0


def test_metrics_serve_what_an_older_database_has(older: str) -> None:
    families = {f.name: f for f in HistoryCollector(older).collect()}
    assert [s.value for s in families[UP_GAUGE].samples] == [1.0]
    assert families["stateglass_batch_lag"].samples
    assert not any(name.startswith("stateglass_progress") for name in families)
    # The rules refuse it: no health series rather than verdicts from part of the facts.
    assert not families[HEALTH_GAUGE].samples


def test_the_first_writer_upgrades_it(older: str, tmp_path: Path) -> None:
    copy = tmp_path / "upgraded.duckdb"
    copy.write_bytes(Path(older).read_bytes())
    Database(str(copy))
    assert read_query(str(copy), "SELECT version FROM schema_info") == [(SCHEMA_VERSION,)]
    assert evaluate(str(copy), AGG)


def _no_database_lines(missing: str, tmp_path: Path) -> list[list[str]]:
    return [
        ["maintain", "--db", missing],
        ["metrics", "--db", missing],
        ["export", "--db", missing, "--table", "batches", "-o", str(tmp_path / "x.csv")],
        ["check", AGG, "--db", missing, "--no-collect"],
        ["report", AGG, "--db", missing, "--no-collect", "-o", str(tmp_path / "r.md")],
    ]


def test_no_such_database_is_one_error_in_the_same_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "none.duckdb")
    line = f"{missing}: no such database; run `stateglass collect` first"
    for call in (
        lambda: read_query(missing, "SELECT 1"),
        lambda: evaluate(missing, AGG),
        lambda: load_report(missing, AGG),
    ):
        with pytest.raises(NoDatabase) as info:
            call()
        assert str(info.value) == line
    for argv in _no_database_lines(missing, tmp_path):
        assert main(argv) == 2, argv
        assert capsys.readouterr().err == f"stateglass: error: {line}\n", argv
    assert not Path(missing).exists()


def test_a_duckdb_file_of_another_program_is_not_ours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = str(tmp_path / "other.duckdb")
    with duckdb.connect(other) as conn:
        conn.execute("CREATE TABLE checkpoints (x INTEGER)")
    line = f"{other}: not a StateGlass history database"
    with pytest.raises(NotAStateGlassDatabase) as info:
        read_query(other, "SELECT count(*) FROM checkpoints")
    assert str(info.value) == line
    out = tmp_path / "x.csv"
    assert main(["export", "--db", other, "--table", "checkpoints", "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"stateglass: error: {line}\n"
    families = list(HistoryCollector(other, lock_timeout_s=0.1).collect())
    assert [(f.name, [s.value for s in f.samples]) for f in families] == [(UP_GAUGE, [0.0])]
