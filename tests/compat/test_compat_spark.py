"""``stateglass compat`` against the truth: real restarts of copies of OLD with the changed query.

For each case a real query wrote OLD (two batches), the changed query wrote NEW on a fresh
checkpoint (one batch), and a copy of OLD is restarted with the changed query on the shared
``spark`` fixture. Spark's decision (and its error class, read from the exception) must be what
the case says, and ``compat OLD NEW`` must predict exactly that: the exit status and the class.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.analysis.compat.rules import (
    FILE_SOURCE_MOVED,
    KEY_NOT_COMPATIBLE,
    OPERATORS_MISMATCH,
    VALUE_NOT_COMPATIBLE,
)
from stateglass.app.cli import main
from tests.compat.spark_runs import ROCKSDB, Confs, error_class, write_json

pytestmark = pytest.mark.slow

SCHEMA = "k INT, v BIGINT, s STRING"
PARTITIONS = "spark.sql.shuffle.partitions"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"

Query = Callable[[Any], Any]  # streaming DataFrame in, streaming DataFrame out


def _agg(df: Any) -> Any:
    return df.groupBy("k").count()


def _dedup(df: Any) -> Any:
    return df.dropDuplicates(["k"])


def _key_type_changed(df: Any) -> Any:
    from pyspark.sql import functions as F

    return df.groupBy(F.col("k").cast("string").alias("k")).count()


def _value_field_added(df: Any) -> Any:
    from pyspark.sql import functions as F

    return df.groupBy("k").agg(F.count("*").alias("count"), F.sum("v").alias("total"))


def _operator_added(df: Any) -> Any:
    return df.dropDuplicates(["k", "v"]).groupBy("k").count()


def _key_renamed(df: Any) -> Any:
    # Renamed upstream, so the state key's field is called `customer` (an alias in groupBy
    # would keep `k`): Spark compares key fields by position and type, not by name.
    return df.withColumnRenamed("k", "customer").groupBy("customer").count()


def _stateless_projection(df: Any) -> Any:
    from pyspark.sql import functions as F

    projected = df.withColumn("v2", F.col("v") * 2).filter(F.col("v2") >= 0)
    return projected.groupBy("k").count().withColumn("doubled", F.col("count") * 2)


def _dedup_key_changed(df: Any) -> Any:
    return df.dropDuplicates(["k", "s"])


@dataclass(frozen=True)
class Case:
    name: str
    base: str  # which OLD: "agg" or "dedup"
    query: Query
    expect: str | None  # Spark's error class, None when it restarts
    source: str = "in"  # the input directory the changed query reads
    confs: dict[str, str] = field(default_factory=dict)
    mode: str = "update"


CASES = [
    Case("key-type-changed", "agg", _key_type_changed, KEY_NOT_COMPATIBLE),
    Case("value-field-added", "agg", _value_field_added, VALUE_NOT_COMPATIBLE),
    Case("operator-added", "agg", _operator_added, OPERATORS_MISMATCH),
    Case("dedup-key-changed", "dedup", _dedup_key_changed, KEY_NOT_COMPATIBLE, mode="append"),
    # Not a state check: the file source lists OLD's newest batch again under the new path.
    Case("input-path-changed", "agg", _agg, FILE_SOURCE_MOVED, source="in-moved"),
    Case("stateless-projection-added", "agg", _stateless_projection, None),
    Case("key-renamed", "agg", _key_renamed, None),
    Case("shuffle-partitions-changed", "agg", _agg, None, confs={PARTITIONS: "3"}),
    Case("provider-changed-to-rocksdb", "agg", _agg, None, confs={PROVIDER: ROCKSDB}),
]
BASES = {"agg": (_agg, "update"), "dedup": (_dedup, "append")}


@dataclass(frozen=True)
class Outcome:
    old: Path  # pristine OLD, never restarted
    new: Path
    spark_error: str | None  # what the real restart raised (error class), None if it ran
    spark_message: str


def _start(spark: Any, query: Query, source: Path, cp: Path, mode: str, **opts: str) -> Any:
    reader = spark.readStream.schema(SCHEMA)
    for key, value in opts.items():
        reader = reader.option(key, value)
    df = query(reader.json(str(source)))
    return (
        df.writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )


@pytest.fixture(scope="module")
def outcomes(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    from pyspark.errors import StreamingQueryException

    root = tmp_path_factory.mktemp("compat")
    source = root / "in"
    source.mkdir()
    write_json(source / "1.json", [(1, 10, "a"), (2, 20, "b")])
    write_json(source / "2.json", [(1, 11, "c"), (3, 30, "d")])
    olds = {base: root / f"old-{base}" for base in BASES}
    # One file per batch: OLD gets two committed batches. Runs on checkpoints of their own go
    # side by side (each query copies the session's confs as it starts): a batch costs mostly
    # driver round trips, which they then share. The restarts go one at a time: every copy of
    # an OLD carries its query id, and Spark stops the active run of an id that starts again.
    started = [
        _start(spark, query, source, olds[base], mode, maxFilesPerTrigger="1")
        for base, (query, mode) in BASES.items()
    ]
    for query in started:
        query.awaitTermination()
    # New data, so that each restart plans a batch (Spark checks state while planning one).
    write_json(source / "3.json", [(2, 21, "e"), (4, 40, "f")])
    shutil.copytree(source, root / "in-moved")
    news = {}
    for case in CASES:
        with Confs(spark, case.confs):
            news[case.name] = _start(
                spark, case.query, root / case.source, root / f"new-{case.name}", case.mode
            )
    out = {}
    for case in CASES:
        restarted = root / f"restart-{case.name}"
        shutil.copytree(olds[case.base], restarted)
        spark_error, message = None, ""
        with Confs(spark, case.confs):
            restart = _start(spark, case.query, root / case.source, restarted, case.mode)
        try:
            restart.awaitTermination()
        except StreamingQueryException as exc:
            spark_error, message = error_class(exc), str(exc)[:400]
        # A restart that Spark accepts runs the new batch (OLD committed batches 0 and 1).
        assert spark_error is not None or (restarted / "commits" / "2").exists(), case.name
        news[case.name].awaitTermination()
        new = root / f"new-{case.name}"
        out[case.name] = Outcome(olds[case.base], new, spark_error, message)
    yield out


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_compat_predicts_the_real_restart(
    case: Case, outcomes: dict[str, Outcome], capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = outcomes[case.name]
    # The case is what it claims: Spark itself refused with this class, or restarted.
    assert outcome.spark_error == case.expect, outcome.spark_message
    status = main(["compat", str(outcome.old), str(outcome.new), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert status == (0 if case.expect is None else 1), report
    assert report["restarts"] is (case.expect is None)
    assert report["error_class"] == outcome.spark_error, report
    assert report["spark_rules"] == "4.x"
    if case.name == "key-renamed":
        details = [d for c in report["checks"] for d in c["details"]]
        assert "key field 0: k int -> customer int (renamed: Spark ignores names)" in details


def test_text_names_the_class_and_the_fields(
    outcomes: dict[str, Outcome], capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = outcomes["key-type-changed"]
    assert main(["compat", str(outcome.old), str(outcome.new)]) == 1
    text = capsys.readouterr().out
    assert f"error class {KEY_NOT_COMPATIBLE}" in text
    assert "key field 0: k int -> _groupingexpression string (type changed)" in text
    assert text.rstrip().endswith(
        f"verdict: Spark would refuse with error class {KEY_NOT_COMPATIBLE}"
    )


def test_pinned_confs_are_reported(
    outcomes: dict[str, Outcome], capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = outcomes["provider-changed-to-rocksdb"]
    assert main(["compat", str(outcome.old), str(outcome.new), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    pinned = [d for c in report["checks"] if c["subject"] == "pinned conf" for d in c["details"]]
    assert any(d.startswith(PROVIDER) and "HDFSBackedStateStoreProvider" in d for d in pinned)
