"""Spark 4.3 judges ``stateglass rewrite --partitions`` on the HDFS-backed provider.

Each query (a streaming aggregation, dropDuplicates with a watermark, a stream-stream join
and its four stores) runs three batches on SRC (2 partitions). StateGlass rewrites SRC to
3 partitions and to 1. Right after the rewrite Spark's state reader on each DST returns SRC's
rows, each in the partition Spark's own ``pmod(hash(key), N)`` gives. Then the query restarts
on each DST (with the new shuffle partitions) and on a copy of SRC that was never rewritten,
three more batches of the same new input each: their state (multisets, ignoring the
partition) and their sink output must be equal.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.cli import main
from tests.conftest import write_batch_files
from tests.rewrite.spark_runs import (
    SHUFFLE,
    Output,
    Run,
    StateRow,
    multiset,
    run_query,
    spark_partitions,
    state_rows,
)

SCHEMA = "k STRING, id BIGINT"
SIZES = (3, 1)


def _batches(count: int) -> list[list[dict[str, Any]]]:
    return [
        [{"k": f"k{(b * 7 + i) % 23}", "id": b * 100 + i} for i in range(20)] for b in range(count)
    ]


def _aggregation(spark: Any, source: Path) -> Any:
    from pyspark.sql import functions as F

    return _read(spark, source).groupBy("k").agg(F.sum("id").alias("s"), F.count("*").alias("c"))


def _dedup(spark: Any, source: Path) -> Any:
    from pyspark.sql import functions as F

    # Event time grows with the batches, so the watermark evicts older batches' keys.
    events = _read(spark, source).withColumn("ts", F.timestamp_seconds(F.floor(F.col("id") / 4)))
    return events.withWatermark("ts", "30 seconds").dropDuplicates(["k", "ts"])


def _join(spark: Any, source: Path) -> Any:
    from pyspark.sql import functions as F

    left = _read(spark, source).select(F.col("k").alias("lk"), F.col("id").alias("lid"))
    right = _read(spark, source).where(F.col("id") % 3 == 0)
    right = right.select(F.col("k").alias("rk"), F.col("id").alias("rid"))
    return left.join(right, F.col("lk") == F.col("rk"))


QUERIES = {"aggregation": _aggregation, "dedup": _dedup, "join": _join}
JOIN_STORES = [
    f"{side}-{store}"
    for side in ("left", "right")
    for store in ("keyToNumValues", "keyWithIndexToValue")
]


def _read(spark: Any, source: Path) -> Any:
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))


def _run(spark: Any, query_name: str, source: Path, cp: Path, partitions: int) -> Output:
    """Run the query until its input is read; its sink output, sorted."""
    mode = "update" if query_name == "aggregation" else "append"
    build = partial(QUERIES[query_name], spark)
    return run_query(spark, Run(build, source, cp, {SHUFFLE: str(partitions)}, mode))


def _stores(query_name: str) -> list[str]:
    return JOIN_STORES if query_name == "join" else ["default"]


def _rows(spark: Any, query_name: str, cp: Path) -> list[StateRow]:
    return state_rows(spark, cp, _stores(query_name))


def _spark_partitions(spark: Any, query_name: str, cp: Path, n: int) -> list[tuple[int, int]]:
    """Each row's partition and Spark's hash of it; a join's ``index`` is not part of its
    partition key."""
    return spark_partitions(
        spark, cp, n, _stores(query_name), lambda names: [f for f in names if f != "index"]
    )


@dataclass(frozen=True)
class Runs:
    src_rows: list[StateRow]
    after_rewrite: dict[int, list[StateRow]]
    placed: dict[int, list[tuple[int, int]]]
    ref_out: Output
    ref_rows: list[StateRow]
    dst_out: dict[int, Output]
    dst_rows: dict[int, list[StateRow]]
    dst: dict[int, Path]
    version: int  # the state version the rewrite wrote (SRC's last batch + 1)


@pytest.fixture(scope="module", params=list(QUERIES))
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory, request: Any) -> Runs:
    name = request.param
    tmp = tmp_path_factory.mktemp(f"rewrite-spark-{name}")
    source = write_batch_files(tmp / "in", _batches(3))
    src, ref = tmp / "src", tmp / "ref"
    _run(spark, name, source, src, 2)
    shutil.copytree(src, ref)
    dst = {n: tmp / f"dst-{n}" for n in SIZES}
    for n, path in dst.items():
        args = ["rewrite", str(src), str(path), "--partitions", str(n), "--apply"]
        assert main([*args, "--verify-with-spark"]) == 0
    after = {n: _rows(spark, name, path) for n, path in dst.items()}
    placed = {n: _spark_partitions(spark, name, path, n) for n, path in dst.items()}
    src_rows = _rows(spark, name, src)
    # A watermark adds a batch without data when it moves: count SRC's batches, not files.
    last_batch = max(int(p.name) for p in (src / "commits").iterdir() if p.name.isdigit())
    write_batch_files(source, _batches(6))
    ref_out = _run(spark, name, source, ref, 2)
    dst_out = {n: _run(spark, name, source, path, n) for n, path in dst.items()}
    return Runs(
        src_rows=src_rows,
        after_rewrite=after,
        placed=placed,
        ref_out=ref_out,
        ref_rows=_rows(spark, name, ref),
        dst_out=dst_out,
        dst_rows={n: _rows(spark, name, path) for n, path in dst.items()},
        dst=dst,
        version=last_batch + 1,
    )


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"to-{n}-partitions")
def test_spark_reads_the_source_rows_in_the_partitions_of_its_hash(runs: Runs, n: int) -> None:
    assert runs.src_rows
    assert multiset(runs.after_rewrite[n]) == multiset(runs.src_rows)
    assert {p for *_, p in runs.after_rewrite[n]} <= set(range(n))
    assert runs.placed[n] and all(p == h for p, h in runs.placed[n])


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"to-{n}-partitions")
def test_a_restart_on_the_rewrite_runs_as_the_source_would(runs: Runs, n: int) -> None:
    assert runs.dst_out[n] and min(row[0] for row in runs.dst_out[n]) >= runs.version
    assert runs.dst_out[n] == runs.ref_out
    assert multiset(runs.dst_rows[n]) == multiset(runs.ref_rows) != multiset(runs.src_rows)
    assert {p for *_, p in runs.dst_rows[n]} <= set(range(n))


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"to-{n}-partitions")
def test_the_rewrite_keeps_no_state_after_its_batch(runs: Runs, n: int) -> None:
    """Right after the rewrite, each partition held one snapshot of the version it wrote; the
    restart added later versions on top of it (no state file came from SRC)."""
    names = {p.name for p in (runs.dst[n] / "state" / "0" / "0").rglob("*") if p.is_file()}
    assert f"{runs.version}.snapshot" in names
    assert not {f"{v}.delta" for v in range(1, runs.version + 1)} & names
