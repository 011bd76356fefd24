"""Fixtures of the dashboard tests: a database with every sample checkpoint collected once
(the session's ``all_samples_db``, shared with the collector, report and eviction tests).

``samples_db`` is shared with the other page tests under ``tests/app/``: it also points
``$STATEGLASS_DB`` at the database, which is where ``AppTest`` pages look for it, for the
one test. The variable is set per test, not per session: several modules point it at a
database of their own for their tests (``MonkeyPatch.context`` in a module fixture) and put
back what they found when they end. A session's setting made inside such a module, when its
tests are the first to ask for the samples (as an xdist worker's order can make them), would
be undone with the module, and every later page would open the default, absent, database.
"""

from __future__ import annotations

import pytest

from stateglass.app.dashboard.context import DB_ENV
from tests.conftest import SamplesDb


@pytest.fixture
def samples_db(all_samples_db: SamplesDb, monkeypatch: pytest.MonkeyPatch) -> str:
    """The DuckDB path, every sample checkpoint collected into it (once per session);
    ``$STATEGLASS_DB`` set for the test."""
    monkeypatch.setenv(DB_ENV, all_samples_db.path)
    return all_samples_db.path
