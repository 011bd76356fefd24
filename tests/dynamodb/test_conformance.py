"""The DynamoDB provider's reader passes the conformance suite plugin authors run on theirs
(docs/providers.md): on the sample (its tables in the session's moto) and on the
flatMapGroupsWithState query, whose timeouts remove keys, with Spark's rows read through the
provider as the truth. Its state is not files: the missing and damaged versions are made in
copies of its tables, and what reading must leave alone includes the tables."""

from __future__ import annotations

import base64
import json
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.provider_conformance import ProviderConformance, SparkRows
from stateglass.collectors.stores.conformance import (
    BrokenVersion,
    StorePartition,
    file_contents,
    store_partitions,
)
from stateglass.collectors.stores.dynamodb import MARKER
from tests.dynamodb.conftest import DynamoRun
from tests.dynamodb_fixtures import DynamoSample
from tests.e2e.oracle import spark_rows_of

PROVIDER = "stateglass.dynamo.DynamoStateStoreProvider"
KEY = "StateKey_QueryVersion"


def table_prefix(checkpoint: str) -> str:
    """The tables' prefix the checkpoint's markers name (one per query)."""
    (prefix,) = {json.loads(m.read_text())["tablePrefix"] for m in Path(checkpoint).rglob(MARKER)}
    return str(prefix)


def table_items(client: Any, prefix: str) -> list[list[str]]:
    """Both tables' items, in a form two readings compare equal in."""
    return [
        sorted(repr(item) for page in pages for item in page["Items"])
        for pages in (
            client.get_paginator("scan").paginate(TableName=f"{prefix}_{t}")
            for t in ("state", "snapshot")
        )
    ]


def copy_store(client: Any, checkpoint: str, target: Path) -> tuple[str, str]:
    """The checkpoint copied under ``target`` with both tables copied beside the originals
    under a prefix of its own, its markers naming the copies: ``(checkpoint, prefix)``."""
    source, prefix = table_prefix(checkpoint), f"conformance{uuid.uuid4().hex[:8]}"
    for table in ("state", "snapshot"):
        desc = client.describe_table(TableName=f"{source}_{table}")["Table"]
        client.create_table(
            TableName=f"{prefix}_{table}",
            KeySchema=desc["KeySchema"],
            AttributeDefinitions=desc["AttributeDefinitions"],
            BillingMode="PAY_PER_REQUEST",
        )
        for page in client.get_paginator("scan").paginate(TableName=f"{source}_{table}"):
            for item in page["Items"]:
                client.put_item(TableName=f"{prefix}_{table}", Item=item)
    copy = target / "checkpoint"
    shutil.copytree(checkpoint, copy)
    for marker in copy.rglob(MARKER):
        doc = json.loads(marker.read_text())
        marker.write_text(json.dumps({**doc, "tablePrefix": prefix}))
    return str(copy), prefix


def middle_version(parts: list[StorePartition]) -> tuple[StorePartition, int]:
    """A partition with more than one version, and a middle version of it that put keys."""
    part = next(p for p in parts if len(p.reader.versions()) > 1)
    manifests = part.reader.manifests  # type: ignore[attr-defined]
    versions = [v for v in part.reader.versions() if manifests[v].puts]
    return part, versions[len(versions) // 2]


class TestDynamoReader(ProviderConformance):
    @pytest.fixture(params=["sample", "fmgws"])
    def checkpoint(self, request: pytest.FixtureRequest) -> str:
        if request.param == "sample":
            sample: DynamoSample = request.getfixturevalue("dynamodb_sample")
            return sample.checkpoint
        run: DynamoRun = request.getfixturevalue("dynamo")
        return str(run.checkpoints[request.param])

    @pytest.fixture
    def provider(self) -> str:
        return PROVIDER

    @pytest.fixture
    def client(self, moto_aws: str) -> Any:
        import boto3

        return boto3.client("dynamodb")

    @pytest.fixture
    def store_contents(self, checkpoint: str, client: Any) -> Callable[[], object]:
        prefix = table_prefix(checkpoint)
        return lambda: (file_contents(checkpoint), table_items(client, prefix))

    @pytest.fixture
    def copied(self, checkpoint: str, client: Any, tmp_path: Path) -> Iterator[tuple[str, str]]:
        """A copy of the checkpoint and its tables, dropped after the test."""
        copy, prefix = copy_store(client, checkpoint, tmp_path)
        yield copy, prefix
        for table in ("state", "snapshot"):
            client.delete_table(TableName=f"{prefix}_{table}")

    @pytest.fixture
    def missing_version(self, copied: tuple[str, str], client: Any) -> BrokenVersion:
        """The copy without one version: gone from the index, its manifest deleted."""
        copy, prefix = copied
        part, version = middle_version(store_partitions(copy))
        store = part.reader.tables.store_prefix  # type: ignore[attr-defined]
        client.update_item(
            TableName=f"{prefix}_state",
            Key={KEY: {"S": f"{store}@versions"}},
            UpdateExpression="DELETE Versions :v",
            ExpressionAttributeValues={":v": {"NS": [str(version)]}},
        )
        client.delete_item(TableName=f"{prefix}_state", Key={KEY: {"S": f"{store}@{version}"}})
        where = (part.store.operator_id, part.store.store_name, part.partition)
        return BrokenVersion(copy, *where, version, (str(version),))

    @pytest.fixture(params=["record", "manifest"])
    def damaged_version(
        self, copied: tuple[str, str], client: Any, request: pytest.FixtureRequest
    ) -> BrokenVersion:
        """The copy with a record one version put overwritten (its value cannot be read; its
        key is in the version's manifest, so ``load_keys`` need not notice), or with the
        version's manifest naming a key that is not base64."""
        copy, prefix = copied
        part, version = middle_version(store_partitions(copy))
        store = part.reader.tables.store_prefix  # type: ignore[attr-defined]
        if request.param == "manifest":
            pk, field, value = f"{store}@{version}", "Puts", {"L": [{"S": "not base64"}]}
        else:
            key = part.reader.manifests[version].puts[0]  # type: ignore[attr-defined]
            pk = f"{store}{base64.b64encode(key).decode()}_{version}"
            field, value = "State", {"B": b"not a gzip stream"}
        client.update_item(
            TableName=f"{prefix}_state",
            Key={KEY: {"S": pk}},
            UpdateExpression="SET #f = :v",
            ExpressionAttributeNames={"#f": field},
            ExpressionAttributeValues={":v": value},
        )
        where = (part.store.operator_id, part.store.store_name, part.partition)
        reads = ("load",) if request.param == "record" else ("load", "load_keys")
        return BrokenVersion(copy, *where, version, (pk,), reads=reads)

    @pytest.fixture
    def spark_rows(self, spark: Any, dynamo: DynamoRun, checkpoint: str) -> SparkRows:
        prefix = table_prefix(checkpoint)
        return spark_rows_of(
            spark, checkpoint, lambda: dynamo.queries.provider_confs(spark, dynamo.endpoint, prefix)
        )
