"""The restart verdict against real restarts: damaged copies of Spark-written checkpoints.

Three small checkpoints are written once (HDFS with snapshots, RocksDB with changelog
checkpointing and snapshots, RocksDB without changelogs). Each case damages a private copy,
asks ``check`` for its verdict, restarts the same query on another copy (availableNow, one new
input file, so a batch runs and every partition loads its state) and checks that Spark agrees.
When the verdict names a way out, a third copy gets exactly the named entries moved aside and
Spark must restart from there.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.analysis.health import HealthConfig, RestartVerdict, judge
from stateglass.app.analysis.health.restart import AFTER_REPAIR, RESTARTS, WILL_NOT
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from stateglass.parsers.sst import sst_blocks, verify_sst
from tests.conftest import spark_conf

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
ZSTD_SSTS = "spark.sql.streaming.stateStore.rocksdb.compression"
QUICK_SNAPSHOTS = {
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1",
    "spark.sql.streaming.stateStore.maintenanceInterval": "100ms",
}


@dataclass(frozen=True)
class Base:
    checkpoint: Path
    inputs: Path
    conf: dict[str, str]


def _write_input(inputs: Path, name: str, offset: int) -> None:
    rows = [{"k": f"k{(offset + j) % 7}", "v": j} for j in range(5)]
    (inputs / f"{name}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _start(spark: Any, base: Base, checkpoint: Path, trigger: dict[str, Any]) -> Any:
    from pyspark.sql import functions as F

    stream = (
        spark.readStream.schema("k string, v long")
        .option("maxFilesPerTrigger", 1)
        .json(str(base.inputs))
    )
    return (
        stream.groupBy("k")
        .agg(F.sum("v").alias("s"))
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def _snapshots(checkpoint: Path, suffix: str) -> list[set[int]]:
    parts = sorted(p for p in (checkpoint / "state" / "0").iterdir() if p.name.isdigit())
    return [{int(f.name.split(".")[0]) for f in p.glob(f"*{suffix}")} for p in parts]


def _wait_snapshots(spark: Any, bases: list[tuple[Base, str]]) -> list[Any]:
    """Feed one file per batch to each query until every partition has two snapshots
    (written by Spark's maintenance task, hence the running queries), then start one more run
    of each that adds deltas after them, and return those runs. The queries run side by side:
    a batch costs mostly driver round trips, which they then share."""
    running = []
    for base, suffix in bases:
        with spark_conf(spark, {**base.conf, **QUICK_SNAPSHOTS}):
            query = _start(spark, base, base.checkpoint, {"processingTime": "100 milliseconds"})
        running.append((base, suffix, query))
    waiting = list(running)
    try:
        for n in range(40):
            for base, _, _ in waiting:
                _write_input(base.inputs, f"{n:03d}", n)
            for entry in list(waiting):
                base, suffix, query = entry
                commit = base.checkpoint / "commits" / str(n)
                while not commit.exists():
                    query.processAllAvailable()
                found = _snapshots(base.checkpoint, suffix)
                if n >= 3 and found and all(len(s) >= 2 for s in found):
                    query.stop()
                    waiting.remove(entry)
            if not waiting:
                break
        else:
            names = [str(base.checkpoint) for base, _, _ in waiting]
            pytest.fail(f"Spark wrote no two snapshots per partition in 40 batches: {names}")
    finally:
        for _, _, query in running:
            query.stop()
    # Two more batches (one run) with snapshots rare again: deltas/changelogs after the newest
    # snapshot.
    last_runs = []
    for base, _ in bases:
        for n in (90, 91):
            _write_input(base.inputs, f"{n:03d}", n)
        with spark_conf(spark, base.conf):
            last_runs.append(_start(spark, base, base.checkpoint, {"availableNow": True}))
    return last_runs


@pytest.fixture(scope="session")
def bases(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Base]:
    root = tmp_path_factory.mktemp("restart-bases")
    out = {}
    # Without changelogs every batch uploads its zip at commit: no waiting needed. Its SSTs
    # are ZSTD-compressed, the one RocksDB codec the samples and the corpus lack. It runs
    # beside the two below.
    conf = {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        CHANGELOG: "false",
        ZSTD_SSTS: "zstd",
    }
    base = Base(root / "rocksdb0" / "checkpoint", root / "rocksdb0" / "in", conf)
    base.inputs.mkdir(parents=True)
    for n in range(3):
        _write_input(base.inputs, f"{n:03d}", n)
    with spark_conf(spark, conf):
        running = [_start(spark, base, base.checkpoint, {"availableNow": True})]
    out["rocksdb0"] = base
    snapshotted = []
    for name, conf, suffix in (
        ("hdfs", {"spark.sql.streaming.stateStore.providerClass": HDFS}, ".snapshot"),
        (
            "rocksdb",
            {"spark.sql.streaming.stateStore.providerClass": ROCKSDB, CHANGELOG: "true"},
            ".zip",
        ),
    ):
        base = Base(root / name / "checkpoint", root / name / "in", conf)
        base.inputs.mkdir(parents=True)
        snapshotted.append((base, suffix))
        out[name] = base
    running += _wait_snapshots(spark, snapshotted)
    for query in running:
        query.awaitTermination()
    return out


def _restart(spark: Any, base: Base, checkpoint: Path, tag: str) -> str | None:
    """Restart the query on ``checkpoint`` with one new input file: None, or Spark's error."""
    _write_input(base.inputs, f"restart-{tag}", 3)
    with spark_conf(spark, base.conf):
        query = _start(spark, base, checkpoint, {"availableNow": True})
        try:
            query.awaitTermination()
        except Exception as exc:  # Spark's StreamingQueryException, whatever it wraps
            return str(exc)
    return None


def _last_committed(cp: Path) -> int:
    return max(int(p.name) for p in (cp / "commits").iterdir() if p.name.isdigit())


def _part(cp: Path, part: int = 0) -> Path:
    return cp / "state" / "0" / str(part)


def _newest(cp: Path, suffix: str, part: int = 0) -> Path:
    files = [f for f in _part(cp, part).glob(f"*{suffix}") if f.name.split(".")[0].isdigit()]
    return max(files, key=lambda f: int(f.name.split(".")[0]))


def _garble(path: Path) -> None:
    path.write_bytes(b"\x00garbage, not a snapshot\x00" * 4)
    crc = path.parent / f".{path.name}.crc"
    crc.unlink(missing_ok=True)  # a rewritten file without its sidecar: the bytes are bad


def _missing_delta(cp: Path, _: Any) -> None:
    (_part(cp) / f"{_last_committed(cp) + 1}.delta").unlink()


def _missing_changelog(cp: Path, _: Any) -> None:
    (_part(cp) / f"{_last_committed(cp) + 1}.changelog").unlink()


def _corrupt_newest_snapshot(suffix: str) -> Callable[[Path, Any], None]:
    def damage(cp: Path, _: Any) -> None:
        _garble(_newest(cp, suffix))

    return damage


def _purge_before(cp: Path, version: int) -> None:
    """What Spark's cleanup leaves: no file of a version below ``version``."""
    for part in (cp / "state" / "0").iterdir():
        for f in part.iterdir():
            head = f.name.lstrip(".").split(".")[0]
            if f.is_file() and head.isdigit() and int(head) < version:
                f.unlink()


def _purged_history(cp: Path, _: Any) -> None:
    oldest_newest = min(max(s) for s in _snapshots(cp, ".snapshot"))
    _purge_before(cp, oldest_newest)


def _corrupt_only_snapshot_purged(cp: Path, _: Any) -> None:
    """The newest snapshot is bad, no older one survives, and the deltas below it are purged."""
    snap = _newest(cp, ".snapshot")
    version = int(snap.name.split(".")[0])
    for f in _part(cp).glob("*.snapshot"):
        if int(f.name.split(".")[0]) < version:
            f.unlink()
    _purge_before(cp, version)
    _garble(snap)


def _missing_sst(cp: Path, _: Any) -> None:
    """The SST only the newest zip references (the last flush's)."""
    ssts = sorted((_part(cp) / "SSTs").glob("*.sst"), key=lambda f: f.name)
    ssts[-1].unlink()


def _newest_sst(cp: Path) -> Path:
    return max((_part(cp) / "SSTs").glob("*.sst"), key=lambda f: f.name)


def _sst_bit_flip(cp: Path, _: Any) -> None:
    """A flipped bit inside the newest SST's first data block, with its Hadoop sidecar gone
    as on an object store: only RocksDB's block checksum sees it."""
    path = _newest_sst(cp)
    data = bytearray(path.read_bytes())
    block = next(b for b in sst_blocks(bytes(data)) if b.kind == "data")
    data[block.offset + block.size // 2] ^= 0x04
    path.write_bytes(bytes(data))
    (path.parent / f".{path.name}.crc").unlink()


def _unfinished_repartition(cp: Path, spark: Any) -> None:
    """Spark's own repartition of an HDFS-provider checkpoint: it fails after offsets/N."""
    with pytest.raises(Exception, match="UNSUPPORTED_PROVIDER"):
        spark._streamingCheckpointManager.repartition(str(cp), 3)


def _bit_flip(cp: Path, _: Any) -> None:
    path = _part(cp) / f"{_last_committed(cp) + 1}.delta"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


CASES = [
    pytest.param("hdfs", _missing_delta, WILL_NOT, id="missing-delta"),
    pytest.param("rocksdb", _missing_changelog, WILL_NOT, id="missing-changelog"),
    pytest.param(
        "hdfs", _corrupt_newest_snapshot(".snapshot"), RESTARTS, id="corrupt-snapshot-older-one"
    ),
    pytest.param("rocksdb", _corrupt_newest_snapshot(".zip"), RESTARTS, id="corrupt-zip-older-one"),
    pytest.param(
        "hdfs", _corrupt_only_snapshot_purged, WILL_NOT, id="corrupt-snapshot-no-older-one"
    ),
    pytest.param("hdfs", _purged_history, RESTARTS, id="purged-history"),
    pytest.param("rocksdb0", _missing_sst, WILL_NOT, id="missing-sst"),
    pytest.param("hdfs", _unfinished_repartition, AFTER_REPAIR, id="unfinished-repartition"),
    pytest.param("hdfs", _bit_flip, WILL_NOT, id="bit-flip-checksum"),
    pytest.param("rocksdb0", _sst_bit_flip, WILL_NOT, id="bit-flip-sst-block"),
    pytest.param("rocksdb", _sst_bit_flip, WILL_NOT, id="bit-flip-sst-block-changelog"),
]


# What Spark's error says, beyond the verdict's error class. Without changelogs the next
# batch's read fails with RocksDB's own words; with them the changelog replay of the load
# does, and Python sees Spark's class (the RocksDBException is its cause, in the log).
SPARK_SAYS: dict[tuple[str, Callable[[Path, Any], None]], str] = {
    ("rocksdb0", _sst_bit_flip): "org.rocksdb.RocksDBException: block checksum mismatch",
    ("rocksdb", _sst_bit_flip): "CANNOT_LOAD_STATE_STORE.UNCATEGORIZED",
}


def _verdict(cp: Path, db: Path) -> RestartVerdict:
    scan_checkpoint(Database(str(db)), str(cp))
    verdict, _ = judge(str(db), str(cp), config=HealthConfig())
    return verdict


def _apply(cp: Path, aside: tuple[str, ...], keep: Path) -> None:
    """The way out, by hand: move the named entries out of the checkpoint."""
    for rel in aside:
        target = keep / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(cp / rel), str(target))
        sidecar = (cp / rel).parent / f".{(cp / rel).name}.crc"
        if sidecar.exists():
            shutil.move(str(sidecar), str(target.parent / sidecar.name))


@pytest.mark.parametrize(("base_name", "damage", "expected"), CASES)
def test_verdict_agrees_with_a_real_restart(
    spark: Any,
    bases: dict[str, Base],
    tmp_path: Path,
    base_name: str,
    damage: Callable[[Path, Any], None],
    expected: str,
) -> None:
    base = bases[base_name]
    damaged = tmp_path / "damaged"
    shutil.copytree(base.checkpoint, damaged)
    damage(damaged, spark)
    restarted, way_out = tmp_path / "restarted", tmp_path / "way-out"
    shutil.copytree(damaged, restarted)
    shutil.copytree(damaged, way_out)

    verdict = _verdict(damaged, tmp_path / "sg.duckdb")
    assert verdict.verdict == expected, verdict
    error = _restart(spark, base, restarted, tmp_path.name)
    assert (error is None) == (verdict.verdict == RESTARTS), (verdict, error)
    if verdict.error_class is not None:
        assert error is not None and verdict.error_class in error
    if (base_name, damage) in SPARK_SAYS:
        assert error is not None and SPARK_SAYS[base_name, damage] in error, error

    if verdict.verdict == RESTARTS:
        return
    assert verdict.way_out is not None
    if verdict.way_out.batch is None:
        return  # no whole batch: Spark failed above, and nothing in the checkpoint helps
    _apply(way_out, verdict.way_out.move_aside, tmp_path / "kept")
    assert _restart(spark, base, way_out, tmp_path.name + "-way-out") is None, verdict.way_out
    assert _last_committed(way_out) > verdict.way_out.batch


def test_bit_flip_is_a_checksum_problem(bases: dict[str, Base], tmp_path: Path) -> None:
    """The flipped bit is named by the checksum, not only by whatever the decoder trips on."""
    from stateglass.collectors.db.read import read_query

    damaged = tmp_path / "damaged"
    shutil.copytree(bases["hdfs"].checkpoint, damaged)
    _bit_flip(damaged, None)
    db = tmp_path / "sg.duckdb"
    scan_checkpoint(Database(str(db)), str(damaged))
    rows = read_query(str(db), "SELECT path, kind, message FROM problems")
    flagged = [r for r in rows if r[1] == "ChecksumMismatch"]
    assert [os.path.basename(r[0]) for r in flagged] == [f"{_last_committed(damaged) + 1}.delta"], (
        rows
    )
    assert "does not match ." in flagged[0][2]


def test_zstd_ssts_verify_and_a_flipped_bit_is_caught(bases: dict[str, Base]) -> None:
    """The ZSTD store's SSTs (the one codec the samples and corpus lack) verify, and a flip
    inside each block of each is named at that block."""
    from tests.parsers.test_sst_checksums import assert_every_flip_caught, codecs

    ssts = sorted(bases["rocksdb0"].checkpoint.glob("state/0/*/SSTs/*.sst"))
    assert ssts
    for path in ssts:
        data = path.read_bytes()
        assert codecs(data) == {7}, path  # kZSTD
        assert verify_sst(data) is None
        for block in range(len(sst_blocks(data))):
            assert_every_flip_caught(data, block, block * 7919, block % 8)
