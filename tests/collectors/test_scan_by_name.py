"""A watcher's scans by name, then one full reconcile, record what full scans record.

A real PySpark aggregation runs one ``availableNow`` query per step (two batches each, so a
scan by name sees two new commits at once), with small retention so that Spark's maintenance
snapshots and purges files between steps (the session's Spark runs its maintenance every
500 ms: tests/conftest.py). After each step the checkpoint is quiet and two
scanners read it: one that lists every directory each time (the oracle), one whose policy
looks new commits up by name until its last scan, which is due for a full reconcile. Every
table must then be identical, apart from the wall-clock columns (when a scan ran).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.schema import TABLES
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.reconcile import ReconcilePolicy
from stateglass.collectors.scan.scanner import Scanner
from tests.collectors.test_watch_scale import JOIN_SAMPLE, REPLAYED, hadoop_crc, tile_join
from tests.conftest import SAMPLES, copy_checkpoint

# A first listing, two scans by name (each of two commits) and the reconcile: every kind of
# scan the policy makes, and a lookup that follows another lookup.
STEPS = 3
BATCHES_PER_STEP = 2
# When a scan ran, not what it found: differs between two scanners of the same files.
WALL_CLOCK = {"first_seen", "last_scan", "last_seen", "seen_at", "purged_at"}
PROVIDERS = {
    "hdfs": {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        ),
    },
    "rocksdb-changelog": {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    },
}
# Small enough that Spark snapshots and purges files while the steps run.
RETENTION = {
    "spark.sql.shuffle.partitions": "3",
    "spark.sql.streaming.minBatchesToRetain": "2",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "200ms",
}


@pytest.fixture(params=sorted(PROVIDERS))
def provider_conf(request: pytest.FixtureRequest, spark: Any) -> Iterator[str]:
    conf = {**RETENTION, **PROVIDERS[request.param]}
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    yield str(request.param)
    for k, v in old.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def write_batch(src: Path, batch: int) -> None:
    rng = random.Random(batch)
    rows = "".join(json.dumps({"k": rng.randrange(400), "v": i}) + "\n" for i in range(300))
    staging = src / f".part-{batch}.tmp"
    staging.write_text(rows)
    staging.rename(src / f"part-{batch:03d}.json")


def run_step(spark: Any, src: Path, cp: Path) -> None:
    """Every new source file, one batch each, then the query stops: the checkpoint is quiet."""
    from pyspark.sql import functions as F

    query = (
        spark.readStream.schema("k LONG, v LONG")
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .groupBy((F.col("k") % 97).alias("g"))
        .agg(F.count("*").alias("n"), F.max("v").alias("top"))
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    query.stop()


def settle(cp: Path, quiet_s: float = 1.5, limit_s: float = 30.0, poll_s: float = 0.1) -> None:
    """Wait until no file under ``cp`` appeared or went for ``quiet_s``: Spark's maintenance
    runs on the executor after the query stopped, and both scanners must see the same files.
    The quiet time counts from the last change seen by a frequent listing (a few hundred
    files), not from the start of a fixed window that a change may have fallen into."""
    deadline = time.monotonic() + limit_s
    before, since = {p for p in cp.rglob("*")}, time.monotonic()
    while time.monotonic() - since < quiet_s:
        if time.monotonic() > deadline:
            raise AssertionError(f"{cp} kept changing for {limit_s} s")
        time.sleep(poll_s)
        now = {p for p in cp.rglob("*")}
        if now != before:
            before, since = now, time.monotonic()


def table_rows(db: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table in TABLES:
        if table == "schema_info":
            continue
        columns = [
            name
            for (name,) in read_query(
                db,
                "SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                "ORDER BY column_index",
                [table],
            )
            if name not in WALL_CLOCK
        ]
        listed = ", ".join(columns)
        out[table] = read_query(db, f"SELECT {listed} FROM {table} ORDER BY ALL")
    return out


def counts(db: str) -> list[tuple[Any, ...]]:
    return read_query(
        db,
        "SELECT operator_id, store_name, partition_id, version, num_keys, keys_added, "
        "keys_removed FROM state_versions ORDER BY ALL",
    )


@pytest.mark.slow
@pytest.mark.spark
def test_scans_by_name_and_one_reconcile_equal_full_scans(
    spark: Any, provider_conf: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, cp = tmp_path / "src", tmp_path / "cp"
    src.mkdir()
    by_name_db, full_db = str(tmp_path / "by-name.duckdb"), str(tmp_path / "full.duckdb")
    # The first scan lists (nothing known yet); then STEPS - 1 scans by name; the last scan
    # finds STEPS - 1 scans by name behind it: a full reconcile is due.
    policy = ReconcilePolicy(every_scans=STEPS - 1, every_s=1e9)
    by_name = Scanner(Database(by_name_db), reconcile=policy)
    full = Scanner(Database(full_db))
    batch = looked_up = 0
    for _ in range(STEPS + 1):
        for _ in range(BATCHES_PER_STEP):
            write_batch(src, batch)
            batch += 1
        run_step(spark, src, cp)
        settle(cp)
        due = policy.full_due(str(cp))
        by_name.scan(str(cp))
        full.scan(str(cp))
        assert_remembered_is_known(by_name, str(cp))
        if not due:
            looked_up += 1
            # Between reconciles each commit's versions land, with the keys they hold.
            assert counts(by_name_db) == counts(full_db)
    assert looked_up == STEPS - 1
    assert policy.full_due(str(cp)) is False  # the last scan was the reconcile
    committed = read_query(full_db, "SELECT count(*) FROM batches WHERE committed")[0][0]
    assert committed == batch
    expected, got = table_rows(full_db), table_rows(by_name_db)
    assert expected["state_versions"], "no state versions: the query kept no state"
    purged = read_query(full_db, "SELECT count(*) FROM state_files WHERE purged")[0][0]
    if not purged:
        # Spark starts its maintenance task once per session, at the interval set then
        # (tests/conftest.py asks for 500 ms); a session started otherwise purges nothing here.
        with capsys.disabled():
            print("\nSpark's maintenance purged nothing during this run: purge checks idle")
    for table in expected:
        assert got[table] == expected[table], table


def _move(batch_files: list[str], held: Path, cp: Path) -> None:
    for rel in batch_files:
        os.rename(held / rel, cp / rel)


def assert_remembered_is_known(scanner: Scanner, root: str) -> None:
    """What a watcher remembers after its scan is what the database tells a fresh one: no
    more (nothing of versions whose files Spark purged), no less."""
    remembered, fresh = scanner._remembered[root].known, scanner.db.known(root)
    assert remembered.log_files == fresh.log_files
    assert remembered.state_files == fresh.state_files
    assert remembered.problem_paths == fresh.problem_paths
    assert remembered.watermarks == fresh.watermarks
    assert remembered.versions == fresh.versions
    assert remembered.sst_bytes_live == fresh.sst_bytes_live


def test_carried_key_sets_count_what_the_files_count(tmp_path: Path) -> None:
    """A watcher applies each new delta to the key sets (and the eviction audit's event
    times) its previous scan ended with; a scanner that rebuilds every version from its
    files must record the very same rows. Real join files (Spark's sample), two commits
    put in place one after the other."""
    cp, held = tmp_path / "cp", tmp_path / "held"
    batches = tile_join(JOIN_SAMPLE, cp, held, 4)
    carried_db, full_db = str(tmp_path / "carried.duckdb"), str(tmp_path / "full.duckdb")
    carried = Scanner(Database(carried_db), reconcile=ReconcilePolicy(1000, 1e9))
    full = Scanner(Database(full_db))
    carried.scan(str(cp))
    full.scan(str(cp))
    # 4 partitions x 4 join stores, and the audited ones' event times.
    assert len(carried.carry) > 4 * 4
    for batch in REPLAYED:
        _move(batches[batch], held, cp)
        carried.scan(str(cp))
        full.scan(str(cp))
        assert_remembered_is_known(carried, str(cp))
    expected, got = table_rows(full_db), table_rows(carried_db)
    newest = max(REPLAYED) + 1
    assert {r[3] for r in counts(carried_db)} >= {newest}
    assert any(row[5] == newest for row in expected["eviction_audit"]), "no audit rows"
    for table in expected:
        assert got[table] == expected[table], table


def test_a_reconcile_catches_what_lookups_by_name_cannot(tmp_path: Path) -> None:
    """Files that go or come outside a commit (Spark's maintenance purging a delta, a
    leftover temporary file) are invisible to a lookup by name: the next full listing
    records them."""
    cp = copy_checkpoint(SAMPLES / "spark-4.3" / "dedup-hdfs", tmp_path / "cp")
    db = str(tmp_path / "sg.duckdb")
    policy = ReconcilePolicy(every_scans=1, every_s=1e9)
    scanner = Scanner(Database(db), reconcile=policy)
    scanner.scan(str(cp))  # nothing known yet: a full listing
    store = cp / "state" / "0" / "0"
    gone, leftover = store / "1.delta", store / ".13.delta.3f2b.tmp"
    # As Spark's maintenance does once version 3 is snapshotted: versions 1 and 2 go.
    for old in (*cp.glob("state/0/*/1.delta"), *cp.glob("state/0/*/2.delta")):
        old.unlink()
    leftover.write_bytes(b"half")

    def seen() -> tuple[bool, bool]:
        purged = read_query(db, "SELECT purged FROM state_files WHERE path = ?", [str(gone)])
        temps = read_query(db, "SELECT count(*) FROM temp_files WHERE path = ?", [str(leftover)])
        return purged[0][0], temps[0][0] == 1

    assert not policy.full_due(str(cp))
    scanner.scan(str(cp))  # by name: no new commit, so nothing is looked up
    assert seen() == (False, False)
    assert policy.full_due(str(cp))
    scanner.scan(str(cp))  # the reconcile
    assert seen() == (True, True)
    # Versions 1 and 2 are gone from the disk: the database no longer reads them, and the
    # watcher does not remember them either.
    assert_remembered_is_known(scanner, str(cp))
    remembered = set().union(*scanner._remembered[str(cp)].known.versions.values())
    assert min(remembered) == 3


def _damage_sidecar(root: Path, delta: Path) -> None:
    """Give ``delta`` a Hadoop sidecar of other bytes (one bit apart): it reads whole, and
    only its checksum check can tell."""
    sidecar = root / delta.parent / f".{delta.name}.crc"
    data = bytearray((root / delta).read_bytes())
    data[len(data) // 2] ^= 0x01
    sidecar.unlink()  # a hard link of the sample's other partitions' files: write a new one
    sidecar.write_bytes(hadoop_crc(bytes(data)))


def test_a_damaged_new_file_is_reported_as_a_collect_reports_it(tmp_path: Path) -> None:
    """A watcher checks new files against their checksum files after writing its rows
    (collectors/scan/late_checks.py). A damaged file gets the problem row a collect files, on a
    full listing and on a scan by name, which then lists in full (as one that trips before
    its write); what the watcher remembers is what the database says, and every table ends
    as a collect's."""
    cp, held = tmp_path / "cp", tmp_path / "held"
    batches = tile_join(JOIN_SAMPLE, cp, held, 4)
    watcher_db, collect_db = str(tmp_path / "watcher.duckdb"), str(tmp_path / "collect.duckdb")
    policy = ReconcilePolicy(every_scans=1, every_s=1e9)
    watcher = Scanner(Database(watcher_db), reconcile=policy)
    collect = Scanner(Database(collect_db))
    batch = REPLAYED[0]
    listed = Path(f"state/0/2/right-keyToNumValues/{batch}.delta")
    looked_up = Path(f"state/0/1/left-keyToNumValues/{batch + 1}.delta")
    _damage_sidecar(cp, listed)
    _damage_sidecar(held, looked_up)
    for path in (listed, looked_up):
        if path == looked_up:
            _move(batches[batch], held, cp)
            assert not policy.full_due(str(cp))
        summary = watcher.scan(str(cp))
        collect.scan(str(cp))
        assert summary.problems == 1
        assert not policy.full_due(str(cp))  # a full listing came last
        rows = read_query(
            watcher_db, "SELECT path, kind FROM problems WHERE path = ?", [str(cp / path)]
        )
        assert rows == [(str(cp / path), "ChecksumMismatch")]
        assert_remembered_is_known(watcher, str(cp))
    expected, got = table_rows(collect_db), table_rows(watcher_db)
    for table in expected:
        assert got[table] == expected[table], table
