"""StateGlass on DynamoDB-backed state equals what the provider itself returns through Spark.

Spark's ``statestore`` source opens the provider's store read-only at a version (the query's
provider confs set, as they were when it ran) and lists its rows: the oracle, row for row.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.cli import main as cli_main
from tests.dynamodb.conftest import BATCHES, DynamoRun
from tests.dynamodb_fixtures import DynamoSample
from tests.e2e.oracle import assert_same_rows, ours, spark_state, spark_states

QUERIES = ("agg", "fmgws")


def committed(run: DynamoRun, name: str) -> list[int]:
    commits = run.checkpoints[name] / "commits"
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())


def provider_rows(spark: Any, run: DynamoRun, name: str, batch: int) -> list[str]:
    if (name, batch) not in run.oracle:
        with run.queries.provider_confs(spark, run.endpoint, name):
            rows = spark_states(
                spark, str(run.checkpoints[name]), 0, "default", committed(run, name)
            )
        run.oracle.update({(name, b): r for b, r in rows.items()})
    return run.oracle[name, batch]


@pytest.mark.parametrize("name", QUERIES)
def test_state_equals_the_provider_at_every_version(
    spark: Any, dynamo: DynamoRun, tmp_path: Any, name: str
) -> None:
    batches = committed(dynamo, name)
    assert len(batches) >= BATCHES, batches
    for batch in batches:
        expected = provider_rows(spark, dynamo, name, batch)
        args = ["state", str(dynamo.checkpoints[name]), "--batch-id", str(batch)]
        assert_same_rows(ours([*args, "--jobs", "1"], tmp_path), expected)


def test_timeouts_removed_state(spark: Any, dynamo: DynamoRun) -> None:
    """The flatMapGroupsWithState query's timeouts removed keys: removals are exercised."""
    counts = [len(provider_rows(spark, dynamo, "fmgws", b)) for b in committed(dynamo, "fmgws")]
    assert any(later < earlier for earlier, later in itertools.pairwise(counts)), counts


@pytest.mark.parametrize("name", QUERIES)
def test_key_counts_equal_the_providers(
    spark: Any, dynamo: DynamoRun, tmp_path: Any, name: str, capfd: pytest.CaptureFixture[str]
) -> None:
    import duckdb

    db = str(tmp_path / "db.duckdb")
    cp = str(dynamo.checkpoints[name])
    from stateglass.collectors.remote import COUNTS

    COUNTS.reset()  # this process's earlier commands are not this collect's
    assert cli_main(["collect", cp, "--db", db, "--verbose"]) == 0
    err = capfd.readouterr().err
    gets = int(err.split(" GET")[0].rsplit(",", 1)[-1].split()[-1])
    batches = committed(dynamo, name)
    # Per partition: one GetItem of the versions and one BatchGetItem of manifests for the
    # listing, the same again for the counts (manifests alone); the eviction audit of the
    # timeout query reads values, two BatchGetItems per partition and version at most.
    assert 2 * 2 * 2 <= gets <= 2 * (4 + 2 * len(batches)), err
    with duckdb.connect(db, read_only=True) as con:
        rows = con.execute(
            "SELECT partition_id, version, num_keys FROM state_versions ORDER BY 1, 2"
        ).fetchall()
        assert con.execute("SELECT * FROM problems").fetchall() == []
    ours_counts = {(p, v): n for p, v, n in rows}
    expected: dict[tuple[int, int], int] = {}
    for batch in batches:
        rows_json = provider_rows(spark, dynamo, name, batch)
        per_partition = Counter(json.loads(r)["partition_id"] for r in rows_json)
        for partition in (0, 1):
            expected[(partition, batch + 1)] = per_partition.get(partition, 0)
    assert ours_counts == expected


def test_never_writes_the_tables(dynamo: DynamoRun, tmp_path: Any) -> None:
    """Reading leaves every item as it was (the tables' full contents before and after)."""
    import boto3

    client = boto3.client("dynamodb")

    def everything() -> list[Any]:
        return [
            sorted(map(repr, client.scan(TableName=t)["Items"]))
            for t in ("agg_state", "agg_snapshot")
        ]

    before = everything()
    cp = str(dynamo.checkpoints["agg"])
    ours(["state", cp, "--jobs", "1"], tmp_path)
    assert cli_main(["info", cp]) == 0
    assert everything() == before
    assert before[1], "the snapshot table is written at the end of each snapshot group"


def test_info_changes_and_check_work_on_dynamodb_state(
    dynamo: DynamoRun, tmp_path: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    cp = str(dynamo.checkpoints["fmgws"])
    assert cli_main(["info", cp]) == 0
    info = capfd.readouterr().out
    assert "stateglass.dynamo.DynamoStateStoreProvider" in info
    changes = ours(["changes", cp, "--from", "1", "--to", "4"], tmp_path)
    assert changes, "the query changed state in batches 1..4"
    db = str(tmp_path / "check.duckdb")
    cli_main(["check", cp, "--db", db])
    report = capfd.readouterr().out
    assert "damaged_files" in report and "holes" in report
    assert not [line for line in report.splitlines() if line.startswith("ERR")], report


def test_the_sample_loads_into_moto_and_reads_as_spark_does(
    spark: Any, dynamo: DynamoRun, dynamodb_sample: DynamoSample, tmp_path: Any
) -> None:
    """sample_checkpoints/dynamodb: the exported tables loaded into the server, the checkpoint
    unpacked; StateGlass's rows at the last batch are the provider's, read through Spark."""
    cp = dynamodb_sample.checkpoint
    batch = max(int(p.name) for p in (Path(cp) / "commits").iterdir() if p.name.isdigit())
    with dynamo.queries.provider_confs(spark, dynamo.endpoint, dynamodb_sample.demo.PREFIX):
        expected = spark_state(spark, cp, 0, "default", batch)
    got = ours(["state", cp, "--batch-id", str(batch), "--jobs", "1"], tmp_path)
    assert_same_rows(got, expected)
