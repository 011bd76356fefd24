"""Every table of the SQL catalog holds what ``stateglass state`` / ``changes`` read, for every
sample checkpoint, store and transformWithState variable, at the last committed batch and two
earlier retained ones.

The comparison is with the commands' Parquet output, as Arrow rows. Those commands are held
to Spark's own reader row for row (tests/e2e/test_fidelity.py, at the same kinds of batches),
and their Parquet to their JSON lines (tests/parsers/test_columnar.py); comparing here with
the commands rather than with a second run of Spark keeps the suite's Spark time where it is.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stateglass.app.cli import main as cli_main
from stateglass.collectors.catalog import SqlSession, TableEntry
from stateglass.collectors.catalog.names import quoted
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.collectors.errors import CollectorError
from tests.conftest import SAMPLES, sample_checkpoints, sample_id


def canonical(value: Any) -> Any:
    """A hashable form of a decoded Arrow value (instants compared in UTC)."""
    if isinstance(value, dict):
        return tuple((k, canonical(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(canonical(v) for v in value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).isoformat()
    if isinstance(value, float) and value != value:
        return "NaN"
    return value


def rows(table: pa.Table) -> Counter[Any]:
    return Counter(canonical(r) for r in table.to_pylist())


def command_rows(args: list[str], out: Path) -> pa.Table:
    code = cli_main([*args, "--format", "parquet", "-o", str(out)])
    assert code == 0, f"stateglass {' '.join(args)} exited {code}"
    return pq.read_table(out)


def view_args(entry: TableEntry, cp: Checkpoint) -> list[str]:
    """The ``state`` / ``changes`` options that read the table's view."""
    store = next(
        (s for s in cp.stores() if s.operator_id == entry.operator_id),
        None,
    )
    assert store is not None
    args = ["--operator", str(entry.operator_id)]
    if entry.kind == "timers":
        return [*args, "--store", store.store_name, "--read-timers"]
    if entry.state_var is not None:
        return [*args, "--store", str(entry.store_name), "--state-var", entry.state_var]
    return [*args, "--store", str(entry.store_name)]


def retained_batches(cp: Checkpoint, entry: TableEntry) -> list[int]:
    """The last committed batch and up to two earlier retained ones."""
    request = StateRequest(int(entry.operator_id or 0), str(entry.store_name))
    if entry.state_var is not None:
        request = StateRequest(request.operator_id, request.store_name, state_var=entry.state_var)
    if entry.kind == "timers":
        request = StateRequest(request.operator_id, request.store_name, read_timers=True)
    source = StateSource(cp, request)
    kept = sorted(v - 1 for v in source.readable_versions() if v - 1 in cp.commit_batch_ids)
    last = kept[-1]
    earlier = kept[:-1]
    picks = {last}
    if earlier:
        picks |= {earlier[-1], earlier[len(earlier) // 2]}
    return sorted(picks)


def _samples() -> list[Any]:
    return [
        pytest.param(p, id=sample_id(p))
        for p in sample_checkpoints()
        if Checkpoint.open(p).commit_batch_ids and not sample_id(p).startswith("demo")
    ]


@pytest.mark.parametrize("path", _samples())
def test_every_state_table_is_what_state_reads(path: str, tmp_path: Path) -> None:
    cp = Checkpoint.open(path)
    compared = 0
    with SqlSession([path]) as session:
        entries = [e for e in session.tables() if e.kind in ("state", "timers")]
        assert entries, "no state table listed"
        for entry in entries:
            name = f"{quoted(entry.schema)}.{quoted(entry.table)}"
            args = view_args(entry, cp)
            for batch in retained_batches(cp, entry):
                got = session.execute(
                    f"SELECT * EXCLUDE (batch_id) FROM {name} WHERE batch_id = {batch}"
                ).table
                out = tmp_path / f"{entry.table}-{batch}.parquet"
                expected = command_rows(["state", path, *args, "--batch-id", str(batch)], out)
                assert got.column_names == expected.column_names, entry.table
                assert rows(got) == rows(expected), f"{entry.table} at batch {batch}"
                compared += 1
            last = session.execute(f"SELECT DISTINCT batch_id FROM {name}").table
            assert last.column("batch_id").to_pylist() in ([], [cp.last_committed_batch])
    assert compared


def _with_changes() -> list[Any]:
    out = []
    for p in sample_checkpoints():
        if sample_id(p).startswith("demo"):
            continue
        cp = Checkpoint.open(p)
        for f in Path(p).glob("state/*/0/*"):
            if f.name.endswith((".delta", ".changelog")):
                out.append(pytest.param(p, id=sample_id(p)))
                break
        del cp
    return out


@pytest.mark.parametrize("path", _with_changes())
def test_every_change_table_is_what_changes_reads(path: str, tmp_path: Path) -> None:
    cp = Checkpoint.open(path)
    last = cp.last_committed_batch
    assert last is not None
    start = max([last - 2, 0, *(r.batch_id + 1 for r in cp.repartitions)])
    compared = 0
    with SqlSession([path]) as session:
        for entry in (e for e in session.tables() if e.kind == "changes"):
            name = f"{quoted(entry.schema)}.{quoted(entry.table)}"
            args = view_args(entry, cp)
            out = tmp_path / f"{entry.table}.parquet"
            window = ["--from", str(start), "--to", str(last), "--format", "parquet"]
            code = cli_main(["changes", path, *args, *window, "-o", str(out)])
            if code != 0:
                continue  # no change feed for this store (RocksDB without changelogs)
            expected = pq.read_table(out)
            got = session.execute(
                f"SELECT * FROM {name} WHERE batch_id BETWEEN {start} AND {last}"
            ).table
            assert got.column_names == expected.column_names
            assert rows(got) == rows(expected), entry.table
            compared += 1
    assert compared


def test_samples_are_here() -> None:
    assert os.path.isdir(SAMPLES)


@pytest.mark.slow
def test_every_corpus_table_is_what_state_reads(fixture_corpus: Path, tmp_path: Path) -> None:
    """The whole corpus (Spark 3.5 to 4.3) in one session, each table at the last committed
    batch: what ``state`` reads there is held to Spark by tests/e2e/test_corpus_fidelity.py."""
    compared = 0
    with SqlSession([str(fixture_corpus)]) as session:
        paths = {schema: Path(p) for schema, p in session.schemas().items()}
        assert len(paths) >= 60
        for entry in session.tables():
            if entry.kind not in ("state", "timers"):
                continue
            path = str(paths[entry.schema])
            cp = Checkpoint.open(path)
            if cp.last_committed_batch is None:
                continue
            out = tmp_path / f"{entry.schema}-{entry.table}.parquet"
            args = ["state", path, *view_args(entry, cp), "--format", "parquet", "-o", str(out)]
            name = f"{quoted(entry.schema)}.{quoted(entry.table)}"
            if cli_main(args) != 0:
                with pytest.raises(CollectorError):
                    session.execute(f"SELECT * FROM {name}")
                continue
            got = session.execute(f"SELECT * EXCLUDE (batch_id) FROM {name}").table
            expected = pq.read_table(out)
            assert rows(got) == rows(expected), f"{entry.schema}.{entry.table}"
            compared += 1
    assert compared >= 60
