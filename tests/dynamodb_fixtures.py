"""Session fixtures for state that lives in DynamoDB: one moto DynamoDB server on 127.0.0.1 for
the whole test session (the environment points the AWS chain at it), and the DynamoDB sample
(``sample_checkpoints/dynamodb``) loaded into it, unpacked and collected into a database.

One server, because the environment has one ``AWS_ENDPOINT_URL``: the queries of
``tests/dynamodb`` write their tables to it, beside the sample's, and tests/remote's S3 bucket
lives there too.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import SAMPLES
from tests.remote.servers import moto_environment


def sample_module(name: str) -> ModuleType:
    """``sample_checkpoints/dynamodb/<name>.py``, loaded from its file (it is not installed)."""
    import sys

    qualified = f"stateglass_dynamodb_{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, SAMPLES / "dynamodb" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def moto_aws() -> Iterator[str]:
    """moto's server on a free loopback port; its endpoint, set as ``AWS_ENDPOINT_URL``. One for
    every AWS service of the session (DynamoDB here, S3 in tests/remote): the environment has
    one endpoint."""
    with moto_environment() as endpoint:
        yield endpoint


@dataclass(frozen=True)
class DynamoSample:
    """The sample's checkpoint (its tables in the session's moto) and a database of it."""

    checkpoint: str  # as the database records it
    db: str
    demo: ModuleType


@pytest.fixture(scope="session")
def dynamodb_sample(moto_aws: str, tmp_path_factory: pytest.TempPathFactory) -> DynamoSample:
    import boto3

    demo = sample_module("demo")
    assert demo.load_tables(boto3.client("dynamodb"), json.loads(demo.TABLES.read_text())) > 0
    base = tmp_path_factory.mktemp("dynamodb-sample")
    checkpoint = demo.unpack(base)
    db = Database(str(Path(base) / "dynamodb.duckdb"))
    summary = scan_checkpoint(db, str(checkpoint))
    assert summary.problems == 0 and summary.versions > 0, summary
    return DynamoSample(summary.checkpoint, db.path, demo)
