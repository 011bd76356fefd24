"""Which way carries out a new partition count: Spark's repartition, ``stateglass rewrite``,
both or neither, said from the logs and operator metadata before any state is read."""

from __future__ import annotations

import shlex
from pathlib import Path

from stateglass.app.analysis.rewrite_command import rewrite_command
from stateglass.app.analysis.rewrite_refusals import repartition_ways
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from tests.conftest import SAMPLES

SPARK_SAYS = "Spark refuses: UNSUPPORTED_PROVIDER"


def test_hdfs_state_is_rewritten_where_spark_refuses() -> None:
    cp = Checkpoint.open(str(SAMPLES / "spark-4.3" / "agg-hdfs"))
    spark, rewrite = repartition_ways(cp, 6, SPARK_SAYS)
    assert spark.refusal == SPARK_SAYS
    assert rewrite.refusal is None
    assert rewrite.command == rewrite_command(cp.root, partitions=6)


def test_transform_with_state_on_rocksdb_goes_either_way() -> None:
    cp = Checkpoint.open(str(SAMPLES / "spark-4.3" / "tws-rocks-cl"))
    spark, rewrite = repartition_ways(cp, 6, None)
    assert spark.refusal is None and f"{cp.root!r}, 6)" in spark.command
    assert rewrite.refusal is None


def test_join_state_in_column_families_is_spark_s_alone(fixture_corpus: Path) -> None:
    cp = Checkpoint.open(str(fixture_corpus / "4.3.0-joinv4/join-rocks-cl/checkpoint"))
    _, rewrite = repartition_ways(cp, 6, None)
    assert rewrite.refusal is not None and "join state formats 3 and 4" in rewrite.refusal


def test_the_rewrite_command_is_one_shell_line_beside_the_source() -> None:
    line = rewrite_command("/data/my orders/", partitions=16, provider="rocksdb")
    assert shlex.split(line) == [
        "stateglass",
        "rewrite",
        "/data/my orders/",
        "/data/my orders-16p-rocksdb",
        "--partitions",
        "16",
        "--provider",
        "rocksdb",
    ]
