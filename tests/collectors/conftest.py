"""Session fixtures: every sample collected once by the local engine; a Spark cluster."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from collectors.db import Database
from collectors.scan import scan_checkpoint
from tests.collectors.cluster import Cluster, standalone_cluster
from tests.collectors.helpers import sample_paths


@pytest.fixture(scope="session")
def samples_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("db") / "samples.duckdb")
    db = Database(path)
    for checkpoint in sample_paths():
        scan_checkpoint(db, checkpoint)
    return path


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone master and two workers (separate JVMs), stopped at the session's end."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("the cluster tests need Java 17+ (see .ci/run)")
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster
