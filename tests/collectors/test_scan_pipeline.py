"""The scan as load → plan → run → write around the one writer: the pure plan on real listings,
what the writer keeps across scans, and that no other module writes to the database."""

from __future__ import annotations

import ast
import os
from datetime import datetime
from pathlib import Path

import pytest

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.listing import list_checkpoint
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan import scanner as scan_module
from stateglass.collectors.scan.plan import ChainSettings, plan
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.collectors.helpers import ROOT, SAMPLES, copy_sample

AGG_HDFS = "spark-4.3/agg-hdfs"
PACKAGES = ("app", "collectors", "parsers")


def _planned(counted: dict[tuple[int, str, int], set[int]], touched: frozenset[str]) -> list:
    cp = Checkpoint.open(str(SAMPLES / AGG_HDFS))
    stores = cp.stores()
    listing = list_checkpoint(cp, stores)
    settings = ChainSettings(root=cp.root)
    return plan(stores, listing, touched, counted, settings, cp.store_dir)


def _all_versions() -> dict[tuple[int, str, int], set[int]]:
    cp = Checkpoint.open(str(SAMPLES / AGG_HDFS))
    counted: dict[tuple[int, str, int], set[int]] = {}
    for f in list_checkpoint(cp, cp.stores()).state_files.values():
        if f.version is not None:
            counted.setdefault(f.chain, set()).add(f.version)
    return counted


def test_plan_reads_every_partition_of_a_new_checkpoint_from_its_first_version() -> None:
    counted = _all_versions()
    tasks = _planned({}, frozenset())
    assert [t.chain for t in tasks] == sorted(counted)
    assert all(t.from_version == min(counted[t.chain]) for t in tasks)


def test_plan_has_no_work_when_everything_is_counted_and_unchanged() -> None:
    assert _planned(_all_versions(), frozenset()) == []


def test_plan_starts_a_chain_at_its_oldest_changed_file() -> None:
    counted = _all_versions()
    cp = Checkpoint.open(str(SAMPLES / AGG_HDFS))
    listing = list_checkpoint(cp, cp.stores())
    chain = sorted(counted)[1]
    changed = sorted(
        (f for f in listing.state_files.values() if f.chain == chain and f.version),
        key=lambda f: f.version or 0,
    )[2]
    tasks = _planned(counted, frozenset({changed.stat.path}))
    assert [(t.chain, t.from_version) for t in tasks] == [(chain, changed.version)]
    # A version not counted yet starts its chain too, even when no file changed.
    counted[chain] = counted[chain] - {max(counted[chain])}
    assert [(t.chain, t.from_version) for t in _planned(counted, frozenset())] == [
        (chain, max(_all_versions()[chain]))
    ]


def test_known_answers_what_the_last_scan_recorded(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "db.duckdb"))
    root = str(SAMPLES / AGG_HDFS)
    assert db.known(root).state_files == {}
    scan_checkpoint(db, root)
    known = db.known(root)
    files = read_query(db.path, "SELECT count(*) FROM state_files WHERE NOT purged")[0][0]
    versions = read_query(db.path, "SELECT count(*) FROM state_versions")[0][0]
    assert len(known.state_files) == files > 0
    assert sum(len(v) for v in known.versions.values()) == versions > 0
    assert set(known.watermarks) == {
        b for (b,) in read_query(db.path, "SELECT batch_id FROM batches")
    }


def test_a_checkpoint_and_a_temp_file_keep_when_they_were_first_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cp = copy_sample(AGG_HDFS, tmp_path)
    leftover = cp / "state" / "0" / "0" / ".3.delta.5e1d.tmp"
    leftover.write_bytes(b"half")
    db = Database(str(tmp_path / "db.duckdb"))
    first, later = datetime(2025, 1, 1), datetime(2025, 6, 1)
    monkeypatch.setattr(scan_module, "_now", lambda: first)
    scan_checkpoint(db, str(cp))
    monkeypatch.setattr(scan_module, "_now", lambda: later)
    os.remove(cp / "state" / "0" / "1" / "1.delta")
    scan_checkpoint(db, str(cp))
    assert read_query(db.path, "SELECT first_seen, last_scan FROM checkpoints") == [(first, later)]
    assert read_query(db.path, "SELECT first_seen FROM temp_files") == [(first,)]
    assert read_query(db.path, "SELECT purged_at FROM state_files WHERE purged") == [(later,)]


def _write_statements(tree: ast.AST) -> list[str]:
    """String constants that start an SQL statement changing data or schema."""
    verbs = ("INSERT ", "UPDATE ", "DELETE ", "DROP ", "ALTER ", "CREATE ")
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.lstrip().upper().startswith(verbs)
    ]


# The modules of the database package that hold SQL changing data or schema: the DDL, and
# the writer's own statements (its transactions, its upsert, the history it keeps, upgrades).
WRITE_SQL_OWNERS = {
    "collectors/db/schema.py",
    "collectors/db/progress_tables.py",
    "collectors/db/views.py",
    "collectors/db/schema_versions.py",
    "collectors/db/writer.py",
    "collectors/db/upsert.py",
    "collectors/db/history_rollup.py",
}
# The SQL catalog opens its own in-memory database and creates its schemas and views there;
# it attaches the history READ_ONLY (tests/collectors/test_catalog_session.py checks the
# file is unchanged), so it writes nothing anyone else reads.
SQL_SESSION = {"collectors/catalog/catalog.py", "collectors/catalog/session.py"}


def test_only_the_one_writer_holds_sql_that_changes_data() -> None:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            statements = _write_statements(ast.parse(path.read_text()))
            if statements and name not in WRITE_SQL_OWNERS | SQL_SESSION:
                found[name] = statements
    assert found == {}
    # Every owner still holds some (a module that stopped is no owner any more).
    for name in WRITE_SQL_OWNERS:
        assert _write_statements(ast.parse((ROOT / name).read_text())), name


def test_only_the_writer_opens_the_database_for_writing() -> None:
    """DuckDB is opened in one place, and read-write only by the writer's transactions."""
    opens, writes = set(), set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            name = path.relative_to(ROOT).as_posix()
            if "duckdb.connect(" in text:
                opens.add(name)
            if "read_only=False" in text:
                writes.add(name)
    assert opens == {"collectors/db/connection.py"} | (opens & SQL_SESSION)
    assert "collectors/catalog/session.py" in opens
    assert writes == {"collectors/db/writer.py"}


def test_the_writer_hands_no_connection_out() -> None:
    public = {name for name in vars(Database) if not name.startswith("_")}
    assert {"known", "record_scan", "progress_files", "write_progress"} <= public
    assert public.isdisjoint({"transaction", "upsert", "delete_where", "connection"})
