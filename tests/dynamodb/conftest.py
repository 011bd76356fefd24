"""Real queries on the DynamoDB state store provider, against moto's DynamoDB server.

The provider is compiled with ``javac`` against PySpark's jars and loaded into the shared
session (``addJar`` for the executors, a context class loader for the driver); the queries
then run with its ``providerClass`` set for their start only (sample_checkpoints/dynamodb),
both at once. Spark's rows at every committed batch (the oracle) are read once per session.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.dynamodb_fixtures import sample_module

# Enough for a snapshot group (3 versions) and a version after it, and for a user's state to
# time out; each batch more costs seconds of Spark.
BATCHES = 4


@dataclass(frozen=True)
class DynamoRun:
    endpoint: str
    queries: ModuleType
    # query name (also its table prefix) -> checkpoint
    checkpoints: dict[str, Path]
    # (query name, batch id) -> the provider's rows through Spark, read once per session
    oracle: dict[tuple[str, int], list[str]] = field(default_factory=dict)


@pytest.fixture(scope="session")
def dynamo(spark: Any, moto_aws: str, tmp_path_factory: pytest.TempPathFactory) -> DynamoRun:
    """The two queries run against the session's moto DynamoDB server."""
    if shutil.which("javac") is None:
        pytest.fail("no javac: install openjdk-17-jdk-headless (.ci/run does)", pytrace=False)
    queries = sample_module("queries")
    endpoint = moto_aws
    base = tmp_path_factory.mktemp("dynamo")
    queries.load_jar(spark, queries.build_jar(base / "jar"))
    # The JVM's environment was fixed at its start: the provider's credentials come from
    # the next link of the AWS chain, Java system properties.
    system = spark.sparkContext._jvm.java.lang.System
    system.setProperty("aws.accessKeyId", "testing")
    system.setProperty("aws.secretAccessKey", "testing")
    runs = {
        "agg": (queries.aggregation_batches(BATCHES), queries.run_aggregation),
        "fmgws": (queries.session_batches(BATCHES), queries.run_with_state),
    }
    checkpoints, started = {}, []
    for name, (batches, run) in runs.items():
        src = queries.write_batches(base / name / "src", batches)
        checkpoints[name] = base / name / "checkpoint"
        # A query takes the session's confs when it starts: both can then run at once.
        with queries.provider_confs(spark, endpoint, name):
            started.append(run(spark, src, checkpoints[name]))
    for query in started:
        query.awaitTermination()
        assert query.exception() is None, query.exception()
    return DynamoRun(endpoint, queries, checkpoints)
