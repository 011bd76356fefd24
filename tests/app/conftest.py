"""Fixtures of the dashboard tests: a database with every sample checkpoint collected once
(the session's ``all_samples_db``, shared with the collector, report and eviction tests).

``samples_db`` is shared with the other page tests under ``tests/app/``: it also points
``$STATEGLASS_DB`` at the database, which is where ``AppTest`` pages look for it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stateglass.app.dashboard.context import DB_ENV
from tests.conftest import SamplesDb


@pytest.fixture(scope="session")
def samples_db(all_samples_db: SamplesDb) -> Iterator[str]:
    """The DuckDB path, every sample checkpoint collected into it; ``$STATEGLASS_DB`` set."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DB_ENV, all_samples_db.path)
        yield all_samples_db.path
