"""Restart cost against the truth: a directory listing with Spark's loading rule, and Spark's
own reader started from the snapshot we say a restart loads (``snapshotStartBatchId``).

The samples were written with ``minDeltasForSnapshot=2`` and a 100 ms maintenance interval,
so Spark's snapshot rule ran after every batch: the what-if at that setting must land on the
snapshots the files show.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from stateglass.app import queries
from stateglass.app.analysis import restart_cost
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from tests.collectors.helpers import SAMPLES
from tests.conftest import SamplesDb

NAMES = [
    "spark-4.3/agg-hdfs",
    "spark-4.3/dedup-hdfs",
    "spark-4.3/agg-rocks",
    "spark-4.3/agg-rocks-cl",
    "spark-3.5/agg-rocks",
]
FILE = re.compile(r"^(\d+)\.(delta|snapshot|zip|changelog)$")


@pytest.fixture(scope="module")
def db(all_samples_db: SamplesDb) -> str:
    """The session's database of every sample (collected once; these tests only read it)."""
    return all_samples_db.path


def _facts(db: str, name: str) -> tuple[Any, Any, str]:
    cp = Checkpoint.open(str(SAMPLES / name))
    facts = queries.restart_facts(db, cp.root, 0, "default")
    live = queries.live_state_files(db, cp.root, 0, "default")
    provider = str(queries.stores(db, cp.root)["provider"].iloc[0])
    return facts, live, provider


def expected_from_listing(partition_dir: Path) -> dict[str, int]:
    """What Spark loads for the newest version, from the directory alone."""
    found: dict[tuple[int, str], int] = {}
    for entry in os.scandir(partition_dir):
        m = FILE.match(entry.name)
        if m:
            found[(int(m.group(1)), m.group(2))] = entry.stat().st_size
    newest = max(v for v, _ in found)
    fulls = [v for v, k in found if k in ("snapshot", "zip") and v <= newest]
    base = max(fulls, default=0)
    loaded = [found[(v, k)] for v, k in found if v == base and k in ("snapshot", "zip")]
    if (base, "zip") in found:
        with zipfile.ZipFile(partition_dir / f"{base}.zip") as z:
            meta = json.loads(z.read("metadata").decode().split("\n", 1)[1])
        for sst in meta["sstFiles"]:
            loaded.append((partition_dir / "SSTs" / sst["dfsSstFileName"]).stat().st_size)
    changes = [
        size for (v, k), size in found.items() if k in ("delta", "changelog") and base < v <= newest
    ]
    return {
        "version": newest,
        "base_version": base,
        "replays": len(changes),
        "files": len(loaded) + len(changes),
        "bytes": sum(loaded) + sum(changes),
    }


@pytest.mark.parametrize("name", NAMES)
def test_current_cost_matches_listing(db: str, name: str) -> None:
    facts, live, _ = _facts(db, name)
    ours = {c.partition: c for c in restart_cost.current_cost(live, facts)}
    root = SAMPLES / name / "state" / "0"
    partitions = sorted(int(p) for p in os.listdir(root) if p.isdigit())
    assert sorted(ours) == partitions
    for p in partitions:
        want = expected_from_listing(root / str(p))
        c = ours[p]
        got = {
            "version": c.version,
            "base_version": c.base_version,
            "replays": c.replays,
            "files": c.files,
            "bytes": c.bytes,
        }
        assert got == want, f"partition {p}"
        assert c.missing == ()
    worst = restart_cost.slowest(list(ours.values()))
    assert worst is not None and worst.bytes == max(c.bytes for c in ours.values())


@pytest.mark.parametrize("name", NAMES)
def test_what_if_at_the_samples_setting_lands_on_their_snapshots(db: str, name: str) -> None:
    facts, live, provider = _facts(db, name)
    changelog = bool(live["kind"].eq("changelog").any())
    inferred = restart_cost.inferred_min_deltas(facts, provider, changelog)
    if provider == "rocksdb" and not changelog:
        assert inferred is None
    else:
        assert inferred == 2  # the generator's minDeltasForSnapshot
    now = {c.partition: c for c in restart_cost.current_cost(live, facts)}
    alt = restart_cost.what_if(facts, provider, inferred or 2, changelog)
    for c in alt:
        real = now[c.partition]
        assert (c.base_version, c.replays, c.bytes, c.estimated) == (
            real.base_version,
            real.replays,
            real.bytes,
            False,
        ), f"partition {c.partition}"


def test_what_if_other_min_deltas_hdfs(db: str) -> None:
    facts, _, provider = _facts(db, "spark-4.3/agg-hdfs")
    root = SAMPLES / "spark-4.3/agg-hdfs" / "state" / "0"
    # M = 4: snapshots at 5 and 10; version 12 replays the deltas of 11 and 12 on 10's.
    for c in restart_cost.what_if(facts, provider, 4, False):
        assert (c.version, c.base_version, c.replays) == (12, 10, 2)
        part = root / str(c.partition)
        assert c.replay_bytes == sum((part / f"{v}.delta").stat().st_size for v in (11, 12))
        assert c.estimated  # no 10.snapshot on disk: its size is an estimate
        assert c.snapshot_bytes > 0
    # M = 0: a snapshot at every version; 12.snapshot exists, so nothing is estimated.
    for c in restart_cost.what_if(facts, provider, 0, False):
        assert (c.base_version, c.replays, c.estimated) == (12, 0, False)
        assert c.bytes == (root / str(c.partition) / "12.snapshot").stat().st_size


def test_what_if_changelog_switch_rocksdb(db: str) -> None:
    facts, live, provider = _facts(db, "spark-4.3/agg-rocks")
    now = {c.partition: c for c in restart_cost.current_cost(live, facts)}
    # Changelog on with M = 5: a snapshot at 10, changelogs 11 and 12 replayed (estimated).
    for c in restart_cost.what_if(facts, provider, 5, True):
        assert (c.base_version, c.replays) == (10, 2)
        assert c.files > c.replays and c.estimated  # the zip of 10 (and its SSTs) is real
    # Switched off on a changelog store: the zip at the newest version, nothing replayed.
    facts_cl, _, _ = _facts(db, "spark-4.3/agg-rocks-cl")
    for c in restart_cost.what_if(facts_cl, "rocksdb", 10, False):
        assert (c.base_version, c.replays) == (12, 0)
        assert c.estimated is False  # 12.zip exists: its size and SSTs are known
    assert all(c.replays == 0 for c in now.values())


@pytest.mark.spark
@pytest.mark.parametrize("name", ["spark-4.3/agg-hdfs", "spark-4.3/agg-rocks-cl"])
def test_spark_restarts_from_the_snapshot_we_name(spark: Any, db: str, name: str) -> None:
    """Spark reads the newest version starting from our base snapshot with exactly the rows
    of a normal read, and cannot start from any version between it and the newest (no
    snapshot there): so ours is the newest snapshot, and the replays are what lies after."""
    facts, live, _ = _facts(db, name)
    path = str(SAMPLES / name)
    newest = int(facts["version"].max())
    # The newest version, and the one before (where the base is older: replays > 0).
    for version in (newest, newest - 1):
        at = restart_cost.current_cost(
            live[live["version"].isna() | (live["version"] <= version)],
            facts[facts["version"] <= version],
        )
        for c in at[:2]:
            p, base = c.partition, c.base_version
            assert c.version == version and c.replays == version - base
            plain = (
                spark.read.format("statestore")
                .option("batchId", version - 1)
                .load(path)
                .where(f"partition_id = {p}")
                .count()
            )
            if base == 0:
                continue
            started = (
                spark.read.format("statestore")
                .option("snapshotStartBatchId", base - 1)
                .option("snapshotPartitionId", p)
                .option("batchId", version - 1)
                .load(path)
                .count()
            )
            assert started == plain
            for later in range(base + 1, version + 1):
                with pytest.raises(Exception):  # noqa: B017 - Spark's error class varies
                    (
                        spark.read.format("statestore")
                        .option("snapshotStartBatchId", later - 1)
                        .option("snapshotPartitionId", p)
                        .option("batchId", version - 1)
                        .load(path)
                        .count()
                    )


def test_report_and_summary_show_growth_and_restart_cost(db: str) -> None:
    from stateglass.app.browse.growth import attribute_growth
    from stateglass.app.escape import md
    from stateglass.app.report import render_html, render_markdown
    from stateglass.collectors.checkpoints.state_views import StateView
    from stateglass.parsers.units import fmt_bytes

    path = str(SAMPLES / "spark-4.3/dedup-hdfs")
    facts, live, _ = _facts(db, "spark-4.3/dedup-hdfs")
    worst = restart_cost.slowest(restart_cost.current_cost(live, facts))
    assert worst is not None
    growth = attribute_growth(StateView(path))
    restart = (
        f"slowest partition {worst.partition}: {fmt_bytes(worst.bytes)} in {worst.files} "
        f"files, {worst.replays} replays"
    )
    summary = render_markdown(db, path)
    assert "## Growth and restart cost" in summary
    assert md(growth.sentence()) in summary
    assert md(restart) in summary
    assert "what if: minDeltasForSnapshot 10" in summary
    page = render_html(db, path)
    assert growth.sentence().replace('"', "&quot;") in page
    assert restart in page
    assert "share of all keys now" in page
    assert "Restart cost per partition" in page and "Keys added per version, by the top" in page


@pytest.mark.parametrize(
    ("name", "suffix", "older", "changes"),
    [
        pytest.param("spark-4.3/agg-hdfs", "snapshot", 9, "delta", id="hdfs"),
        pytest.param("spark-4.3/agg-rocks-cl", "zip", 10, "changelog", id="rocksdb-changelog"),
    ],
)
def test_a_damaged_snapshot_costs_the_replay_from_an_older_one(
    tmp_path: Path, name: str, suffix: str, older: int, changes: str
) -> None:
    """Spark's automatic snapshot repair skips the newest snapshot when it cannot be read and
    loads the one before, replaying the deltas or changelogs after it: so does the cost."""
    from stateglass.collectors.db.writer import Database
    from stateglass.collectors.scan.scanner import scan_checkpoint
    from tests.conftest import copy_checkpoint

    cp = copy_checkpoint(SAMPLES / name, tmp_path / "cp")
    part = cp / "state" / "0" / "0"
    # Cut short, as tests/damage makes it: the scan files it as a problem.
    (part / f"12.{suffix}").write_bytes(b"")
    (part / f".12.{suffix}.crc").unlink(missing_ok=True)
    db = str(tmp_path / "sg.duckdb")
    scan_checkpoint(Database(db), str(cp))
    live = queries.live_state_files(db, str(cp), 0, "default")
    facts = queries.restart_facts(db, str(cp), 0, "default")
    costs = {c.partition: c for c in restart_cost.current_cost(live, facts)}

    replayed = [part / f"{v}.{changes}" for v in range(older + 1, 13)]
    assert (costs[0].version, costs[0].base_version) == (12, older)
    assert costs[0].replays == len(replayed) == 12 - older
    assert costs[0].replay_bytes == sum(f.stat().st_size for f in replayed)
    assert costs[0].snapshot_bytes >= (part / f"{older}.{suffix}").stat().st_size
    assert costs[0].missing == ()
    # The partitions left whole still load their newest snapshot.
    assert all(c.base_version == 12 and c.replays == 0 for p, c in costs.items() if p != 0)
