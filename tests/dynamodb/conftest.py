"""Real queries on the DynamoDB state store provider, against moto's DynamoDB server.

The provider is compiled with ``javac`` against PySpark's jars and loaded into the shared
session (``addJar`` for the executors, a context class loader for the driver); the queries
then run with its ``providerClass`` set for their start only (sample_checkpoints/dynamodb).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import SAMPLES
from tests.remote.servers import env_for


def provider_module() -> ModuleType:
    """sample_checkpoints/dynamodb/queries.py, loaded from its file (it is not installed)."""
    name = "stateglass_dynamo_queries"
    spec = importlib.util.spec_from_file_location(name, SAMPLES / "dynamodb" / "queries.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    import sys

    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class DynamoRun:
    endpoint: str
    queries: ModuleType
    # query name (also its table prefix) -> checkpoint
    checkpoints: dict[str, Path]
    # (query name, batch id) -> the provider's rows through Spark, read once per session
    oracle: dict[tuple[str, int], list[str]] = field(default_factory=dict)


@pytest.fixture(scope="session")
def dynamo(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DynamoRun]:
    """moto's DynamoDB server on a free loopback port, and the two queries run against it."""
    if shutil.which("javac") is None:
        pytest.fail("no javac: install openjdk-17-jdk-headless (.ci/run does)", pytrace=False)
    from moto.server import ThreadedMotoServer

    queries = provider_module()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = dict(os.environ)
    os.environ.update(env_for(endpoint))
    try:
        base = tmp_path_factory.mktemp("dynamo")
        queries.load_jar(spark, queries.build_jar(base / "jar"))
        # The JVM's environment was fixed at its start: the provider's credentials come from
        # the next link of the AWS chain, Java system properties.
        system = spark.sparkContext._jvm.java.lang.System
        system.setProperty("aws.accessKeyId", "testing")
        system.setProperty("aws.secretAccessKey", "testing")
        runs = {
            "agg": (queries.aggregation_batches(), queries.run_aggregation),
            "fmgws": (queries.session_batches(), queries.run_with_state),
        }
        checkpoints = {}
        for name, (batches, run) in runs.items():
            src = queries.write_batches(base / name / "src", batches)
            checkpoints[name] = base / name / "checkpoint"
            with queries.provider_confs(spark, endpoint, name):
                run(spark, src, checkpoints[name])
        yield DynamoRun(endpoint, queries, checkpoints)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        server.stop()
