"""Fixtures of the dashboard tests: a database with every sample checkpoint collected once.

``samples_db`` is shared with the other page tests under ``tests/app/``: it also points
``$STATEGLASS_DB`` at the database, which is where ``AppTest`` pages look for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.catalog import find_checkpoints
from app.dashboard.context import DB_ENV
from collectors.db import Database
from collectors.scan import scan_checkpoint

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"


def sample_checkpoints() -> list[str]:
    return find_checkpoints(str(SAMPLES))


@pytest.fixture(scope="session")
def samples_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The DuckDB path, every sample checkpoint collected into it; ``$STATEGLASS_DB`` set."""
    path = str(tmp_path_factory.mktemp("dashboard") / "samples.duckdb")
    db = Database(path)
    for checkpoint in sample_checkpoints():
        scan_checkpoint(db, checkpoint)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DB_ENV, path)
        yield path
