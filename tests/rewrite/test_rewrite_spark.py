"""Spark 4.3 judges ``stateglass rewrite --partitions`` on the HDFS-backed provider.

A streaming aggregation runs three batches on SRC (2 partitions). StateGlass rewrites SRC to
3 partitions and to 1. Right after the rewrite Spark's state reader on each DST returns SRC's
rows, each in the partition Spark's own ``pmod(hash(key), N)`` gives. Then the query restarts
on each DST (with the new shuffle partitions) and on a copy of SRC that was never rewritten,
three more batches of the same new input each: their state (multisets, ignoring the
partition) and their sink output must be equal.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.cli import main
from tests.conftest import spark_conf, write_batch_files

SCHEMA = "k STRING, id BIGINT"
SHUFFLE = "spark.sql.shuffle.partitions"
SIZES = (3, 1)


def _batches(count: int) -> list[list[dict[str, Any]]]:
    return [
        [{"k": f"k{(b * 7 + i) % 23}", "id": b * 100 + i} for i in range(20)] for b in range(count)
    ]


def _run(spark: Any, source: Path, cp: Path, partitions: int) -> list[tuple[Any, ...]]:
    """Run the aggregation until its input is read; its sink output, sorted."""
    from pyspark.sql import functions as F

    out: list[tuple[Any, ...]] = []

    def sink(frame: Any, batch_id: int) -> None:
        out.extend((batch_id, *row) for row in frame.collect())

    with spark_conf(spark, {SHUFFLE: str(partitions)}):
        query = (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .groupBy("k")
            .agg(F.sum("id").alias("s"), F.count("*").alias("c"))
            .writeStream.outputMode("update")
            .foreachBatch(sink)
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return sorted(out)


def _rows(spark: Any, cp: Path) -> list[tuple[str, str, int]]:
    """Spark's reader: ``(key, value, partition_id)`` of every row, sorted."""
    rows = spark.read.format("statestore").load(str(cp)).collect()
    return sorted((str(r["key"]), str(r["value"]), r["partition_id"]) for r in rows)


def _spark_partitions(spark: Any, cp: Path, n: int) -> list[tuple[int, int]]:
    """``(partition_id, pmod(hash(key), n))`` of every row, Spark computing the hash."""
    from pyspark.sql import functions as F

    frame = spark.read.format("statestore").load(str(cp))
    hashed = frame.select("partition_id", F.pmod(F.hash(F.col("key.k")), F.lit(n)).alias("h"))
    return [(r["partition_id"], r["h"]) for r in hashed.collect()]


def _multiset(rows: list[tuple[str, str, int]]) -> list[tuple[str, str]]:
    return sorted((k, v) for k, v, _ in rows)


@dataclass(frozen=True)
class Runs:
    src_rows: list[tuple[str, str, int]]
    after_rewrite: dict[int, list[tuple[str, str, int]]]
    placed: dict[int, list[tuple[int, int]]]
    ref_out: list[tuple[Any, ...]]
    ref_rows: list[tuple[str, str, int]]
    dst_out: dict[int, list[tuple[Any, ...]]]
    dst_rows: dict[int, list[tuple[str, str, int]]]
    dst: dict[int, Path]


@pytest.fixture(scope="module")
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    tmp = tmp_path_factory.mktemp("rewrite-spark")
    source = write_batch_files(tmp / "in", _batches(3))
    src, ref = tmp / "src", tmp / "ref"
    _run(spark, source, src, 2)
    shutil.copytree(src, ref)
    dst = {n: tmp / f"dst-{n}" for n in SIZES}
    for n, path in dst.items():
        assert main(["rewrite", str(src), str(path), "--partitions", str(n), "--apply"]) == 0
    after = {n: _rows(spark, path) for n, path in dst.items()}
    placed = {n: _spark_partitions(spark, path, n) for n, path in dst.items()}
    src_rows = _rows(spark, src)
    write_batch_files(source, _batches(6))
    ref_out = _run(spark, source, ref, 2)
    dst_out = {n: _run(spark, source, path, n) for n, path in dst.items()}
    return Runs(
        src_rows=src_rows,
        after_rewrite=after,
        placed=placed,
        ref_out=ref_out,
        ref_rows=_rows(spark, ref),
        dst_out=dst_out,
        dst_rows={n: _rows(spark, path) for n, path in dst.items()},
        dst=dst,
    )


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"to-{n}-partitions")
def test_spark_reads_the_source_rows_in_the_partitions_of_its_hash(runs: Runs, n: int) -> None:
    assert runs.src_rows
    assert _multiset(runs.after_rewrite[n]) == _multiset(runs.src_rows)
    assert {p for _, _, p in runs.after_rewrite[n]} <= set(range(n))
    assert runs.placed[n] and all(p == h for p, h in runs.placed[n])


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"to-{n}-partitions")
def test_a_restart_on_the_rewrite_runs_as_the_source_would(runs: Runs, n: int) -> None:
    assert {row[0] for row in runs.dst_out[n]} == {3, 4, 5}
    assert runs.dst_out[n] == runs.ref_out
    assert _multiset(runs.dst_rows[n]) == _multiset(runs.ref_rows) != _multiset(runs.src_rows)
    assert {p for _, _, p in runs.dst_rows[n]} == set(range(n))


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"to-{n}-partitions")
def test_the_rewrite_keeps_no_state_after_its_batch(runs: Runs, n: int) -> None:
    """Right after the rewrite, each partition held one snapshot of version 3; the restart
    added versions 4-6 on top of it (no state file of a later version came from SRC)."""
    names = {p.name for p in (runs.dst[n] / "state" / "0" / "0").iterdir() if p.is_file()}
    assert "3.snapshot" in names
    assert not {"1.delta", "2.delta", "3.delta"} & names
