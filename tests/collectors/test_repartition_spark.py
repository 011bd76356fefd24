"""Checkpoints Spark 4.3 repartitioned for real, read on both sides of the repartition.

One session-scoped set of checkpoints (``sample_checkpoints/make_repartitioned.py`` driven by
the shared ``spark`` session): up and down, aggregation, window aggregation, stream-stream join
and transformWithState, changelog checkpointing on and off, each run again after the
repartition. The golden checkpoints Spark 4.2 wrote (``sample_checkpoints/spark-4.2/``) go
through the same checks. Spark's ``statestore`` reader is the oracle, row for row.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from stateglass.app.analysis.health import ERR, WARN, evaluate
from stateglass.app.cli import main as cli_main
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import SAMPLES
from tests.e2e.oracle import (
    assert_same_rows,
    ours,
    spark_changes,
    spark_state,
    spark_stores,
    state_reads,
)

pytestmark = pytest.mark.spark

GOLDEN = sorted((SAMPLES / "spark-4.2").glob("repart-*"))
# Rules that must stay quiet on a healthy repartitioned checkpoint.
QUIET = {"holes", "damaged_files", "orphans", "partition_skew", "schema_drift", "retention"}


def _generator() -> ModuleType:
    path = SAMPLES / "make_repartitioned.py"
    spec = importlib.util.spec_from_file_location("make_repartitioned", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _scenarios(gen: ModuleType) -> list[Any]:
    s = gen.Scenario
    # Aggregation and dropDuplicates, up and down, are the golden 4.2 checkpoints'.
    return [
        s("join-down", "join", 4, 3, changelog=False),
        s("window-up-cl", "window", 2, 3),
        s("tws-down-cl", "tws", 3, 2),
    ]


@dataclass(frozen=True)
class Repartitioned:
    checkpoints: dict[str, Path]  # by id: "4.3/<scenario>" (written here) or "4.2/<golden>"
    db: str  # every one of them collected into this one database


@pytest.fixture(scope="session")
def repartitioned(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Repartitioned:
    gen = _generator()
    base = tmp_path_factory.mktemp("repartitioned")
    found = {f"4.2/{p.name}": p for p in GOLDEN}
    with warnings.catch_warnings():
        # PySpark 4.3 warns about pandas 3 on every pandas UDF; the pinned pandas is 3.x.
        warnings.filterwarnings(
            "ignore", "PySpark does not yet fully support pandas", FutureWarning
        )
        for scenario in _scenarios(gen):
            # Two batches, the repartition, one more: before, at and after, and no more.
            cp = gen.write_scenario(spark, scenario, base / scenario.name, 2, 1)
            found[f"4.3/{scenario.name}"] = cp
    db_path = str(base / "history.duckdb")
    db = Database(db_path)
    for path in found.values():
        scan_checkpoint(db, str(path))
    return Repartitioned(found, db_path)


def test_golden_checkpoints_exist() -> None:
    assert len(GOLDEN) >= 3, "run /tmp/ps42/bin/python sample_checkpoints/make_repartitioned.py"


def _each(repartitioned: Repartitioned) -> list[tuple[str, Path]]:
    return sorted(repartitioned.checkpoints.items())


def test_state_equals_spark_before_at_and_after(
    spark: Any, repartitioned: Repartitioned, tmp_path: Path
) -> None:
    """The batch before the repartition, the repartition batch, the one after."""
    compared = 0
    for name, path in _each(repartitioned):
        cp = Checkpoint.open(str(path))
        (move,) = cp.repartitions
        batches = [move.batch_id - 1, move.batch_id, move.batch_id + 1]
        assert spark_stores(spark, str(path)) == {
            (s.operator_id, s.store_name) for s in cp.stores()
        }
        for store in cp.stores():
            for _, options, args in state_reads(store):
                for batch in batches:
                    expected = spark_state(
                        spark, str(path), store.operator_id, store.store_name, batch, options
                    )
                    got = ours(
                        [
                            "state",
                            str(path),
                            "--operator",
                            str(store.operator_id),
                            "--store",
                            store.store_name,
                            "--batch-id",
                            str(batch),
                            *args,
                        ],
                        tmp_path,
                    )
                    assert_same_rows(got, expected), (name, store.store_name, batch)
                    compared += 1
    assert compared >= 3 * len(repartitioned.checkpoints)


def test_key_counts_per_partition_equal_spark(spark: Any, repartitioned: Repartitioned) -> None:
    """Both partition counts of each checkpoint sit in the one database, each version with
    Spark's rows per partition at that batch."""
    from pyspark.sql import functions as F

    for name, path in _each(repartitioned):
        cp = Checkpoint.open(str(path))
        (move,) = cp.repartitions
        for store in cp.stores():
            if store.uses_column_families:
                continue  # transformWithState: raw keys span column families (architecture.md)
            got = {
                (v - 1, p): n
                for p, v, n in read_query(
                    repartitioned.db,
                    "SELECT partition_id, version, num_keys FROM state_versions "
                    "WHERE checkpoint = ? AND operator_id = ? AND store_name = ?",
                    [cp.root, store.operator_id, store.store_name],
                )
            }
            frames = [
                spark.read.format("statestore")
                .option("batchId", b)
                .option("operatorId", store.operator_id)
                .option("storeName", store.store_name)
                .load(str(path))
                .select(F.lit(b).alias("batch"), "partition_id")
                for b in cp.commit_batch_ids
            ]
            rows = functools.reduce(lambda a, b: a.unionAll(b), frames).collect()
            theirs = Counter((r["batch"], r["partition_id"]) for r in rows)
            expected = {
                (b, p): theirs.get((b, p), 0)
                for b in cp.commit_batch_ids
                for p in cp.partitions_at(store.operator_id, b)
            }
            assert {k: got.get(k) for k in expected} == expected, (name, store.store_name)
            counts = {len(cp.partitions_at(store.operator_id, b)) for b in cp.commit_batch_ids}
            assert counts == {move.partitions_before, move.partitions_after}
            totals = read_query(
                repartitioned.db,
                "SELECT batch_id, partitions, num_keys FROM store_totals WHERE checkpoint = ? "
                "AND operator_id = ? AND store_name = ? ORDER BY batch_id",
                [cp.root, store.operator_id, store.store_name],
            )
            assert [(b, n) for b, n, _ in totals] == [
                (b, len(cp.partitions_at(store.operator_id, b))) for b in cp.commit_batch_ids
            ]
            assert all(keys == sum(theirs[(b, p)] for p in range(n)) for b, n, keys in totals)


def test_check_is_quiet_and_info_names_the_repartition(
    repartitioned: Repartitioned, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, path in _each(repartitioned):
        cp = Checkpoint.open(str(path))
        (move,) = cp.repartitions
        loud = [
            f
            for f in evaluate(repartitioned.db, str(path))
            if f.rule in QUIET and f.status in (ERR, WARN)
        ]
        assert loud == [], name
        views = read_query(
            repartitioned.db,
            "SELECT batch_id, partitions_before, partitions_after FROM repartitions "
            "WHERE checkpoint = ?",
            [cp.root],
        )
        assert views == [(move.batch_id, move.partitions_before, move.partitions_after)]
        capsys.readouterr()
        assert cli_main(["info", str(path)]) == 0
        text = capsys.readouterr().out
        line = (
            f"partitions   {move.partitions_before} → {move.partitions_after} "
            f"at batch {move.batch_id} (repartition)"
        )
        assert line in text, name
        assert cli_main(["info", str(path), "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        for store in info["stores"]:
            assert store["num_partitions"] == move.partitions_after
            assert store["batch_ids"] == cp.commit_batch_ids, name


def test_changes_equal_spark_on_each_side(
    spark: Any, repartitioned: Repartitioned, tmp_path: Path
) -> None:
    """The change feed before and after the repartition is Spark's; across it, neither Spark
    nor StateGlass has change records (the repartition writes no changelog), and we say why."""
    compared = 0
    for name, path in _each(repartitioned):
        cp = Checkpoint.open(str(path))
        (move,) = cp.repartitions
        store = cp.stores()[0]
        if not any((path / "state" / "0" / "0").glob("*.changelog")):
            continue  # change data needs changelog checkpointing
        if store.uses_column_families:
            continue
        base = ["changes", str(path), "--store", store.store_name]
        last = cp.commit_batch_ids[-1]
        for start, end in ((0, move.batch_id - 1), (move.batch_id + 1, last)):
            expected = spark_changes(spark, str(path), 0, store.store_name, start, end)
            got = ours([*base, "--from", str(start), "--to", str(end)], tmp_path)
            assert_same_rows(got, expected), (name, start, end)
            compared += 1
        out = tmp_path / "across.jsonl"
        code = cli_main([*base, "--from", str(move.batch_id), "-o", str(out)])
        assert code == 2, name
    assert compared >= 4
