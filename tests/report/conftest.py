"""The report tests' database: every sample checkpoint collected once per test session (the
session's ``all_samples_db``)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from stateglass.collectors.db.read import read_query
from tests.conftest import SamplesDb


@pytest.fixture(scope="session")
def report_db(all_samples_db: SamplesDb) -> str:
    """Every sample collected once per session (shared with the app and collector tests)."""
    return all_samples_db.path


def report_now(db: str, checkpoint: str) -> datetime:
    """A minute after the checkpoint's last commit: time rules see a query that is running."""
    (last,) = read_query(
        db, "SELECT max(committed_at) FROM batches WHERE checkpoint = ?", [checkpoint]
    )[0]
    return last + timedelta(minutes=1)
