"""One conformance suite for every engine: each must produce the very same tables.

Subclass :class:`EngineConformance` and give it an ``engine`` fixture. The reference is the
local engine over the same small set of sample checkpoints (both providers, a join with four
stores, changelog checkpointing), into a fresh database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collectors.db import Database
from collectors.engines import LocalEngine, get_engine
from collectors.engines.base import Engine
from collectors.scan import scan_checkpoint
from tests.collectors.helpers import SAMPLES, TABLES, table

CONFORMANCE_SAMPLES = ("spark-4.3/agg-hdfs", "spark-4.3/agg-rocks-cl", "spark-4.3/join-hdfs")


def _collect(engine: Engine, db_path: Path) -> str:
    db = Database(str(db_path))
    for name in CONFORMANCE_SAMPLES:
        scan_checkpoint(db, str(SAMPLES / name), engine=engine)
    return db.path


@pytest.fixture(scope="module")
def reference_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _collect(LocalEngine(), tmp_path_factory.mktemp("ref") / "ref.duckdb")


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


class TestLocalEngine(EngineConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def engine(cls) -> Engine:
        return LocalEngine()


@pytest.mark.spark
class TestSparkEngine(EngineConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def engine(cls, spark: Any) -> Engine:
        # The shared session is active: the engine reuses it instead of starting another.
        return get_engine("spark")
