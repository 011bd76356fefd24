"""A database with every sample checkpoint collected once by the local engine."""

from __future__ import annotations

import pytest

from collectors.db import Database
from collectors.scan import scan_checkpoint
from tests.collectors.helpers import sample_paths


@pytest.fixture(scope="session")
def samples_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("db") / "samples.duckdb")
    db = Database(path)
    for checkpoint in sample_paths():
        scan_checkpoint(db, checkpoint)
    return path
