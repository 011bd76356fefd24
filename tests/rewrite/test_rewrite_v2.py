"""Spark 4.3 judges ``stateglass rewrite`` of a checkpoint in state store checkpoint format v2
(``checkpointFormatVersion=2``: RocksDB files named by unique ids, which commits list).

The rewrite gives every written partition a new unique id (``<V>_<id>.zip``) and names the ids
in ``commits/<B>``'s ``stateUniqueIds``, where Spark looks them up. Spark's state reader on DST
returns SRC's rows, each in the partition of Spark's hash; the query restarted on DST (3
partitions, still format v2) and on a never-rewritten copy of SRC runs three more batches to the
same sink output and state.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from stateglass.app.cli import main
from tests.conftest import spark_conf, write_batch_files
from tests.rewrite.rocksdb_runs import batches, run_aggregation
from tests.rewrite.test_rocksdb_command import CHANGELOG, PROVIDER, ROCKSDB, SHUFFLE, _misplaced

FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"
V2 = {PROVIDER: ROCKSDB, CHANGELOG: "true", FORMAT_VERSION: "2"}


def _rows(spark: Any, cp: Path) -> list[tuple[str, str]]:
    # Spark's reader takes the file naming (unique ids or not) from the session's conf.
    with spark_conf(spark, {FORMAT_VERSION: "2"}):
        rows = spark.read.format("statestore").load(str(cp)).collect()
    return sorted((str(r["key"]), str(r["value"])) for r in rows)


def test_spark_restarts_on_a_rewrite_of_a_format_v2_checkpoint(spark: Any, tmp_path: Path) -> None:
    source = write_batch_files(tmp_path / "in", batches(3, 19))
    src, dst, ref = tmp_path / "src", tmp_path / "dst", tmp_path / "ref"
    run_aggregation(spark, source, src, {**V2, SHUFFLE: "2"})
    shutil.copytree(src, ref)
    assert main(["rewrite", str(src), str(dst), "--partitions", "3", "--apply"]) == 0

    ids = json.loads((dst / "commits" / "2").read_text().split("\n")[1])["stateUniqueIds"]
    assert len(ids["0"]) == 3
    for partition, (unique_id,) in enumerate(ids["0"]):
        assert (dst / "state" / "0" / str(partition) / f"3_{unique_id}.zip").is_file()
    before = _rows(spark, src)
    with spark_conf(spark, {FORMAT_VERSION: "2"}):
        assert _misplaced(spark, dst, 3) == 0
    assert before and _rows(spark, dst) == before

    write_batch_files(source, batches(6, 19))
    from_ref = run_aggregation(spark, source, ref, {**V2, SHUFFLE: "2"})
    from_dst = run_aggregation(spark, source, dst, {**V2, SHUFFLE: "3"})
    assert {row[0] for row in from_dst} == {3, 4, 5}
    assert from_dst == from_ref
    assert _rows(spark, dst) == _rows(spark, ref) != before
