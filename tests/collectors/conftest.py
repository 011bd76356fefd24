"""Every sample collected once per session by the local engine; a Spark cluster per module."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.collectors.cluster import Cluster, standalone_cluster
from tests.conftest import SamplesDb


@pytest.fixture(scope="session")
def samples_db(all_samples_db: SamplesDb) -> str:
    """Every sample collected once per session (shared with the app and report tests)."""
    return all_samples_db.path


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone master and two workers (separate JVMs), shared by one module's tests and
    stopped after them: three idle JVMs would otherwise hold memory and wake for heartbeats
    through the rest of the session."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("the cluster tests need Java 17+ (see .ci/run)")
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster
