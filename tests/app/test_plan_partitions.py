"""The repartition planner against Spark's own repartition.

Real PySpark 4.3 queries (RocksDB provider, 3 partitions) write an aggregation, a
dropDuplicates and a stream-stream join; copies of each are repartitioned up and down with
``spark._streamingCheckpointManager.repartition``. What ``plan-partitions`` predicted on the
checkpoint before must be what Spark wrote: keys per partition exactly as Spark's state reader
counts them at the repartition batch, and the stored key+value bytes of each new partition
(read from the repartitioned zip and SSTs with RocksDB itself) within 10 %.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.analysis.repartition.plan import plan_partitions
from stateglass.app.cli import main
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from tests.conftest import spark_conf, write_batch_files

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
SCHEMA = "k STRING, id BIGINT"
# (query, partition count Spark repartitions a copy of it to): up and down from 3. The
# suite runs one of each operator and both directions; the rest run with `make bench-tests`.
CASES = [
    pytest.param("agg", 2, id="agg-to-2"),
    pytest.param("agg", 7, id="agg-to-7"),
    pytest.param("dedup", 5, id="dedup-to-5"),
    pytest.param("join", 2, id="join-to-2"),
    pytest.param("agg", 5, id="agg-to-5", marks=pytest.mark.benchmark),
    pytest.param("dedup", 2, id="dedup-to-2", marks=pytest.mark.benchmark),
    pytest.param("join", 5, id="join-to-5", marks=pytest.mark.benchmark),
    pytest.param("join", 7, id="join-to-7", marks=pytest.mark.benchmark),
]


def _rows(batch: int, side: str) -> list[dict[str, Any]]:
    return [{"k": f"{side}k{(batch * 7 + i) % 61}", "id": batch * 1000 + i} for i in range(150)]


@pytest.fixture(scope="module")
def checkpoints(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from pyspark.sql import functions as F

    base = tmp_path_factory.mktemp("plan")
    left = write_batch_files(base / "left", [_rows(b, "") for b in range(2)])
    right = write_batch_files(base / "right", [_rows(b + 5, "") for b in range(2)])
    one = write_batch_files(base / "one", [_rows(0, "")])  # Spark refuses it before reading

    def stream(src: Path) -> Any:
        return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))

    def join() -> Any:
        lhs = stream(left).select(F.col("k").alias("lk"), F.col("id").alias("lid"))
        rhs = stream(right).select(F.col("k").alias("rk"), F.col("id").alias("rid"))
        return lhs.join(rhs, F.col("lk") == F.col("rk"))

    built = {
        "agg": ("update", lambda: stream(left).groupBy("k").agg(F.sum("id").alias("s")), ROCKSDB),
        "dedup": ("append", lambda: stream(left).dropDuplicates(["id"]), ROCKSDB),
        "join": ("append", join, ROCKSDB),
        "agg_hdfs": ("update", lambda: stream(one).groupBy("k").count(), HDFS),
    }
    out = {}
    for name, (mode, build, provider) in built.items():
        conf = {
            "spark.sql.shuffle.partitions": "3",
            "spark.sql.streaming.stateStore.providerClass": provider,
        }
        with spark_conf(spark, conf):
            query = (
                build()
                .writeStream.format("noop")
                .outputMode(mode)
                .option("checkpointLocation", str(base / name))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
        out[name] = base / name
    return out


def _stored_bytes(store_dir: Path, version: int) -> int:
    """Key + value bytes of every entry of ``version``, restored from its zip and SSTs and
    read by RocksDB (rocksdict), not by StateGlass's reader."""
    import rocksdict

    tmp = tempfile.mkdtemp(prefix="plan-test-")
    try:
        with zipfile.ZipFile(store_dir / f"{version}.zip") as archive:
            archive.extractall(tmp)
        meta = json.loads(Path(tmp, "metadata").read_text().splitlines()[1])
        for sst in meta.get("sstFiles", []):
            shutil.copy(store_dir / "SSTs" / sst["dfsSstFileName"], Path(tmp, sst["localFileName"]))
        db = rocksdict.Rdict(
            tmp,
            options=rocksdict.Options(raw_mode=True),
            access_type=rocksdict.AccessType.read_only(),
        )
        try:
            return sum(len(k) + len(v) for k, v in db.items())
        finally:
            db.close()
    finally:
        shutil.rmtree(tmp)


def _last_commit(cp: Path) -> int:
    return max(int(f.name) for f in (cp / "commits").iterdir() if f.name.isdigit())


def _spark_keys(spark: Any, cp: Path, batch: int, store: str, n: int) -> tuple[int, ...]:
    rows = (
        spark.read.format("statestore")
        .option("batchId", batch)
        .option("storeName", store)
        .load(str(cp))
        .groupBy("partition_id")
        .count()
        .collect()
    )
    found = {r["partition_id"]: r["count"] for r in rows}
    assert set(found) <= set(range(n))
    return tuple(found.get(p, 0) for p in range(n))


@pytest.mark.parametrize(("name", "n"), CASES)
def test_prediction_is_what_spark_wrote(
    spark: Any, checkpoints: dict[str, Path], tmp_path: Path, name: str, n: int
) -> None:
    plan = plan_partitions(Checkpoint.open(str(checkpoints[name])), n)
    assert plan.current_partitions == 3 and not plan.refusals
    copy = tmp_path / name
    shutil.copytree(checkpoints[name], copy)
    spark._streamingCheckpointManager.repartition(str(copy), n)
    batch = _last_commit(copy)
    assert batch == plan.batch_id + 1
    expected_stores = 4 if name == "join" else 1
    assert len(plan.stores) == expected_stores
    for store in plan.stores:
        assert store.unhashed == 0
        assert sum(store.keys) > 0, "empty against empty is not a match"
        assert store.keys == _spark_keys(spark, copy, batch, store.label, n), store.label
        for p in range(n):
            real = _stored_bytes(copy / "state" / "0" / str(p) / _store_dir(store.label), batch + 1)
            assert abs(store.bytes[p] - real) <= 0.1 * real, (store.label, p)
    # Planning again from the repartition batch: n partitions now, holding what was planned
    # (after a scale-down the higher partitions' directories remain, without that version).
    again = plan_partitions(Checkpoint.open(str(copy)), n + 1)
    assert again.batch_id == batch and again.current_partitions == n
    assert [s.current_keys for s in again.stores] == [s.keys for s in plan.stores]


def _store_dir(label: str) -> str:
    return "" if label == "default" else label


def test_hdfs_checkpoint_refused_as_spark_refuses_and_offered_to_rewrite(
    spark: Any, checkpoints: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "hdfs"
    shutil.copytree(checkpoints["agg_hdfs"], copy)
    with pytest.raises(Exception, match="UNSUPPORTED_PROVIDER"):
        spark._streamingCheckpointManager.repartition(str(copy), 5)
    cp = str(checkpoints["agg_hdfs"])
    assert main(["plan-partitions", cp, "--partitions", "5"]) == 1
    out = capsys.readouterr().out
    assert "Spark would refuse to repartition (checkpoint)" in out and "UNSUPPORTED_PROVIDER" in out
    assert "Spark 4.2+ repartition: does not apply" in out
    assert f"stateglass rewrite: stateglass rewrite {cp} {cp}-5p --partitions 5" in out
    assert main(["plan-partitions", cp, "--partitions", "5", "--format", "json"]) == 1
    ways = json.loads(capsys.readouterr().out)["ways"]
    assert [(w["tool"], w["refusal"] is None) for w in ways] == [
        ("Spark 4.2+ repartition", False),
        ("stateglass rewrite", True),
    ]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param(["--partitions", "0"], "greater than zero", id="n-below-one"),
        pytest.param(["--partitions", "3"], "already has 3 partitions", id="n-is-current"),
    ],
)
def test_bad_partition_counts(
    checkpoints: dict[str, Path], capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    assert main(["plan-partitions", str(checkpoints["agg"]), *args]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_not_a_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan-partitions", str(tmp_path), "--partitions", "4"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and len(err.strip().splitlines()) == 1


def test_json_and_text_agree(
    checkpoints: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["plan-partitions", str(checkpoints["join"]), "--partitions", "4", "--format", "json"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    plan = plan_partitions(Checkpoint.open(str(checkpoints["join"])), 4)
    assert data["keys"] == list(plan.keys) and data["partitions"] == 4
    assert [s["store"] for s in data["stores"]] == [s.label for s in plan.stores]
    assert data["rewrite_seconds"] > 0 and "repartitions" in data["rewrite_estimate"]["basis"]
    assert main(["plan-partitions", str(checkpoints["join"]), "--partitions", "4"]) == 0
    text = capsys.readouterr().out
    assert "an estimate" in text and "slowest restart: partition" in text
    assert os.path.basename(str(checkpoints["join"])) in text


def test_row_hash_is_sparks_for_every_covered_type(spark: Any) -> None:
    """``row_partition`` of decoded values against Spark's ``pmod(hash(…), n)`` (Murmur3,
    seed 42: the shuffle's hash), for the types no sample key has."""
    from decimal import Decimal

    from stateglass.parsers.partitioning import row_partition
    from stateglass.parsers.sparktypes import AtomicType, DecimalType, StructField, StructType

    cases = [
        ("CAST(1.5 AS DOUBLE)", AtomicType("double"), 1.5),
        ("CAST(-0.0 AS DOUBLE)", AtomicType("double"), -0.0),
        ("CAST(2.25 AS FLOAT)", AtomicType("float"), 2.25),
        ("CAST(-7 AS TINYINT)", AtomicType("byte"), -7),
        ("CAST(123.45 AS DECIMAL(10,2))", DecimalType(10, 2), Decimal("123.45")),
        (
            "CAST(-98765432109876543210.5 AS DECIMAL(30,1))",
            DecimalType(30, 1),
            Decimal("-98765432109876543210.5"),
        ),
        ("X'00FF10'", AtomicType("binary"), b"\x00\xff\x10"),
        ("DATE'2024-02-29'", AtomicType("date"), 19782),
        ("TIMESTAMP_NTZ'2024-01-01 00:00:01'", AtomicType("timestamp_ntz"), 1704067201000000),
        ("true", AtomicType("boolean"), True),
        ("'héllo'", AtomicType("string"), "héllo"),
    ]
    n = 7
    exprs = ", ".join(f"pmod(hash({sql}), {n})" for sql, _, _ in cases)
    (row,) = spark.sql(f"SELECT {exprs}").collect()
    for (sql, data_type, value), expected in zip(cases, row, strict=True):
        schema = StructType((StructField("c", data_type),))
        assert row_partition(schema, (value,), n) == expected, sql
