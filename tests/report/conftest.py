"""The report tests' database: every sample checkpoint collected once per test session."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from app.catalog import find_checkpoints
from collectors.db import Database, read_query
from collectors.scan import scan_checkpoint

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"
SAMPLE_PATHS = find_checkpoints(str(SAMPLES))


def sample_id(path: str) -> str:
    return str(Path(path).relative_to(SAMPLES))


@pytest.fixture(scope="session")
def report_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("report-db") / "samples.duckdb")
    db = Database(path)
    for checkpoint in SAMPLE_PATHS:
        scan_checkpoint(db, checkpoint)
    return path


def report_now(db: str, checkpoint: str) -> datetime:
    """A minute after the checkpoint's last commit: time rules see a query that is running."""
    (last,) = read_query(
        db, "SELECT max(committed_at) FROM batches WHERE checkpoint = ?", [checkpoint]
    )[0]
    return last + timedelta(minutes=1)
