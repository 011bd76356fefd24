"""One conformance suite for every engine: each must produce the very same tables.

Subclass :class:`EngineConformance` and give it an ``engine`` fixture. The reference is the
local engine over the same small set of sample checkpoints (both providers, a join with four
stores, changelog checkpointing), into a fresh database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.checkpoints.listing import classify
from stateglass.collectors.db.writer import Database
from stateglass.collectors.engines import LocalEngine, get_engine
from stateglass.collectors.engines.base import Engine
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.collectors.helpers import SAMPLES, TABLES, copy_sample, table

CONFORMANCE_SAMPLES = ("spark-4.3/agg-hdfs", "spark-4.3/agg-rocks-cl", "spark-4.3/join-hdfs")


def _collect(engine: Engine, db_path: Path) -> str:
    db = Database(str(db_path))
    for name in CONFORMANCE_SAMPLES:
        scan_checkpoint(db, str(SAMPLES / name), engine=engine)
    return db.path


INCREMENTAL_SAMPLES = ("spark-4.3/agg-hdfs", "spark-4.3/agg-rocks-cl")


def _hide_after(checkpoint: Path, last_batch: int, aside: Path) -> list[tuple[Path, Path]]:
    """Move batches after ``last_batch`` (logs and state files) out of a checkpoint copy, as
    if the query had not run them yet; the moves to undo."""
    moves = []
    for path in sorted(checkpoint.rglob("*")):
        if not path.is_file():
            continue
        if path.parent.name in ("offsets", "commits"):
            late = path.name.isdigit() and int(path.name) > last_batch
        else:
            kind = classify(path.name)
            late = kind is not None and kind[0] is not None and kind[0] > last_batch + 1
        if late:
            dst = aside / path.relative_to(checkpoint)
            dst.parent.mkdir(parents=True, exist_ok=True)
            path.replace(dst)
            moves.append((dst, path))
    return moves


def _collect_in_two_steps(engine: Engine, where: Path) -> tuple[str, int]:
    """Collect copies holding the first batches, then again with every batch: the second
    scan starts mid-chain. The database and how many chains the second scan counted."""
    copies = [copy_sample(name, where) for name in INCREMENTAL_SAMPLES]
    moves = [m for cp in copies for m in _hide_after(cp, 7, where / "aside" / cp.name)]
    db = Database(str(where / "db.duckdb"))
    for cp in copies:
        scan_checkpoint(db, str(cp), engine=engine)
    for src, dst in moves:
        src.replace(dst)
    chains = sum(scan_checkpoint(db, str(cp), engine=engine).chains for cp in copies)
    return db.path, chains


@pytest.fixture(scope="module")
def reference_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _collect(LocalEngine(), tmp_path_factory.mktemp("ref") / "ref.duckdb")


@pytest.fixture(scope="module")
def incremental_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int]:
    """The local engine's two-step collect, made once for every engine's class: where its
    copies are, its database, and how many chains its second scan counted."""
    where = tmp_path_factory.mktemp("incremental-ref")
    db, chains = _collect_in_two_steps(LocalEngine(), where)
    return where, db, chains


class EngineConformance:
    """Tables written through an engine equal the reference tables, row for row."""

    @pytest.fixture(scope="class")
    @classmethod
    def engine(cls) -> Engine:
        raise NotImplementedError

    @pytest.fixture(scope="class")
    @classmethod
    def engine_db(cls, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> str:
        return _collect(engine, tmp_path_factory.mktemp("engine") / "engine.duckdb")

    @pytest.mark.parametrize("name", TABLES)
    def test_table_identical(self, engine_db: str, reference_db: str, name: str) -> None:
        assert table(engine_db, name) == table(reference_db, name)

    def test_recollect_writes_nothing_new(self, engine: Engine, engine_db: str) -> None:
        db = Database(engine_db)
        for name in CONFORMANCE_SAMPLES:
            summary = scan_checkpoint(db, str(SAMPLES / name), engine=engine)
            assert (summary.chains, summary.versions) == (0, 0)

    def test_incremental_collect_identical(
        self, engine: Engine, incremental_reference: tuple[Path, str, int], tmp_path: Path
    ) -> None:
        ref_where, ref, ref_chains = incremental_reference
        got, chains = _collect_in_two_steps(engine, tmp_path / "engine")
        assert chains == ref_chains > 0
        for name in TABLES:
            mine = table(got, name, str(tmp_path / "engine"))
            assert mine == table(ref, name, str(ref_where)), name
            assert mine or name == "problems"


class TestLocalEngine(EngineConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def engine(cls) -> Engine:
        return LocalEngine()


class TestLocalEngineJobs(EngineConformance):
    """``collect --jobs 2``: chains in two forked worker processes."""

    @pytest.fixture(scope="class")
    @classmethod
    def engine(cls) -> Engine:
        return LocalEngine(jobs=2)

    def test_chains_ran_in_workers(self, tmp_path: Path) -> None:
        # Not a silent pass: the conformance cases above may have run in-process, since a
        # process with other threads (this test session's Spark gateway) never forks. A fresh
        # process has none, and must use its workers.
        import subprocess
        import sys

        sample, db = SAMPLES / "spark-4.3/join-hdfs", tmp_path / "db.duckdb"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "stateglass.app.cli",
                "collect",
                str(sample),
                "--db",
                str(db),
                "--jobs",
                "2",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        assert "(partitions counted in 2 worker processes)" in proc.stdout + proc.stderr


@pytest.mark.spark
class TestSparkEngine(EngineConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def engine(cls, spark: Any) -> Engine:
        # The shared session is active: the engine reuses it instead of starting another.
        return get_engine("spark")
