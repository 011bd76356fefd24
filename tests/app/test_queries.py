"""The dashboard's read-only queries, checked against the tables they summarize."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from stateglass.app import queries
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.db.writes import ScanWrite
from stateglass.parsers.logs import parse_file_source_log
from tests.conftest import SAMPLES, sample_checkpoints

HDFS = str(SAMPLES / "spark-4.3" / "agg-hdfs")
ROCKS = str(SAMPLES / "spark-4.3" / "agg-rocks")


def test_overview_totals_match_state_versions(samples_db: str) -> None:
    overview = queries.checkpoint_overview(samples_db).set_index("checkpoint")
    assert sorted(overview.index) == sorted(sample_checkpoints())
    newest: dict[tuple[str, int, str, int], tuple[int, int]] = {}
    for cp, op, store, part, version, keys in read_query(
        samples_db,
        "SELECT checkpoint, operator_id, store_name, partition_id, version, num_keys "
        "FROM state_versions",
    ):
        key = (cp, op, store, part)
        if key not in newest or version > newest[key][0]:
            newest[key] = (version, keys or 0)
    # Of the partitions the store has at its newest version: a repartition to fewer
    # partitions (spark-4.2/repart-*-down*) leaves the others' last versions behind.
    store_newest: dict[tuple[str, int, str], int] = defaultdict(int)
    for (cp, op, store, _), (version, _) in newest.items():
        store_newest[cp, op, store] = max(store_newest[cp, op, store], version)
    totals: dict[str, int] = defaultdict(int)
    for (cp, op, store, part), (_, keys) in newest.items():
        count = Checkpoint.open(cp).partition_count_at(store_newest[cp, op, store] - 1)
        if count is None or part < count:
            totals[cp] += keys
    down = str(SAMPLES / "spark-4.2" / "repart-agg-down")
    (newest,) = read_query(
        samples_db,
        "SELECT num_keys FROM store_totals WHERE checkpoint = ? ORDER BY version DESC LIMIT 1",
        [down],
    )
    assert totals[down] == newest[0]
    for cp, total in totals.items():
        assert overview.loc[cp, "total_keys"] == total, cp
    # Bytes on disk: the files of the checkpoint's state directory as the filesystem has them.
    on_disk = sum(
        os.path.getsize(os.path.join(d, f))
        for d, _, files in os.walk(os.path.join(HDFS, "state"))
        for f in files
        if f.endswith((".delta", ".snapshot"))
    )
    assert overview.loc[HDFS, "total_bytes"] == on_disk
    row = overview.loc[HDFS]
    assert row["last_committed_batch"] == Checkpoint.open(HDFS).last_committed_batch
    assert row["lag_batches"] == 0 and row["problems"] == 0
    assert "stateStoreSave/default (hdfs)" in row["operators"]


def test_batches_have_the_view_metrics(samples_db: str) -> None:
    frame = queries.batches(samples_db, HDFS)
    cp = Checkpoint.open(HDFS)
    assert list(frame["batch_id"]) == cp.offset_batch_ids
    first, second = frame.iloc[0], frame.iloc[1]
    assert pd.isna(first["interval_ms"])
    expected = cp.offsets(1).batch_timestamp_ms - cp.offsets(0).batch_timestamp_ms
    assert second["interval_ms"] == expected
    # Durations come from file mtimes (commits/N minus offsets/N); a fresh git clone gives
    # meaningless ones, so compare with the files rather than assume Spark's order.
    for _, row in frame.iterrows():
        b = int(row["batch_id"])
        # In microseconds, as the database keeps times.
        offsets_mtime = os.stat(os.path.join(HDFS, "offsets", str(b))).st_mtime_ns // 1000
        commit_mtime = os.stat(os.path.join(HDFS, "commits", str(b))).st_mtime_ns // 1000
        # The view compares the times themselves: a commit a fraction of a millisecond older
        # than its offsets (a clone writes both in the same instant) has no duration either.
        if commit_mtime < offsets_mtime:
            assert pd.isna(row["duration_ms"])
        else:
            assert abs(row["duration_ms"] - (commit_mtime - offsets_mtime) / 1000) <= 1
    # agg-hdfs has a 10 min watermark: delay = batch time - watermark, both as timestamps.
    with_wm = frame[frame["watermark"].notna()]
    assert not with_wm.empty
    delta = (with_wm["batch_time"] - with_wm["watermark"]).dt.total_seconds() * 1000
    assert (delta.round() == with_wm["delay_ms"].astype("float64")).all()


def test_state_queries_of_one_store(samples_db: str) -> None:
    rows = queries.state_versions(samples_db, ROCKS, 0, "default")
    assert set(rows["partition_id"]) == {0, 1, 2, 3}
    assert (rows["batch_id"] == rows["version"] - 1).all()
    sst = queries.sst_reuse(samples_db, ROCKS, 0, "default")
    live = rows.groupby("version")["sst_bytes_live"].sum()
    assert (
        sst.set_index("version")["sst_bytes_uploaded"]
        + sst.set_index("version")["sst_bytes_reused"]
        == live.loc[sst["version"]]
    ).all()
    kinds = queries.bytes_by_kind(samples_db, ROCKS, 0, "default")
    assert set(kinds["kind"]) == {"zip", "sst"}
    usage = queries.disk_usage(samples_db, ROCKS, 0, "default").set_index("kind")
    zips = [
        os.path.getsize(os.path.join(d, f))
        for d, _, files in os.walk(os.path.join(ROCKS, "state"))
        for f in files
        if f.endswith(".zip")
    ]
    assert usage.loc["zip", "files"] == len(zips) and usage.loc["zip", "bytes"] == sum(zips)
    lag = queries.snapshot_lag(samples_db, HDFS, 0, "default")
    assert list(lag["partition_id"]) == [0, 1, 2, 3]
    assert (lag["latest_version"] == rows["version"].max()).all()
    growth = queries.state_growth(samples_db, HDFS, 0, "default")
    hdfs_rows = queries.state_versions(samples_db, HDFS, 0, "default")
    assert list(growth["num_keys"]) == list(hdfs_rows.groupby("version")["num_keys"].sum())


def test_file_source_input_counts_the_source_log(samples_db: str) -> None:
    inputs = queries.input_per_batch(samples_db, HDFS)
    cp = Checkpoint.open(HDFS)
    files: dict[int, set[str]] = defaultdict(set)
    for info in cp.list_dir("sources", "0"):
        if info.name.split(".")[0].isdigit() and not info.name.endswith(".crc"):
            for entry in cp.parse(cp.path("sources", "0", info.name), parse_file_source_log):
                files[entry.batch_id].add(entry.path)
    assert set(inputs["unit"]) == {"files"}
    assert dict(zip(inputs["batch_id"], inputs["amount"], strict=True)) == {
        b: len(paths) for b, paths in files.items()
    }


def _offsets(*per_batch: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "batch_id": range(len(per_batch)),
            "source_offsets": [
                json.dumps([{"source_id": "0", "offset": o}]) if o else None for o in per_batch
            ],
        }
    )


@pytest.mark.parametrize(
    ("offsets", "amounts", "unit"),
    [
        pytest.param(
            ['{"t":{"0":10,"1":5}}', '{"t":{"0":25,"1":9}}', '{"t":{"0":25,"1":10}}'],
            [19, 1],
            "records",
            id="kafka",
        ),
        pytest.param(
            ['{"offset":100,"timestamp":1}', '{"offset":350,"timestamp":2}'],
            [250],
            "rows",
            id="rate-micro-batch",
        ),
        # A bare number, no checkpoint to say it is a rate source: the steps, nothing guessed.
        pytest.param(["4", "9", "15"], [5, 6], queries.BARE_NUMBER, id="bare-number"),
        pytest.param(['{"topic":"x"}', '{"topic":"y"}'], [], None, id="unknown-source"),
        pytest.param(["not json", "{"], [], None, id="garbage"),
    ],
)
def test_input_from_offsets(offsets: list[str], amounts: list[float], unit: str | None) -> None:
    frame = queries.input_from_offsets(_offsets(*offsets))
    assert list(frame["amount"]) == amounts
    assert set(frame["unit"]) == ({unit} if unit else set())
    assert list(frame["batch_id"]) == list(range(1, len(amounts) + 1))


def test_data_version_moves_when_a_writer_commits(tmp_path: Path) -> None:
    path = str(tmp_path / "db.duckdb")
    assert queries.data_version(path) == 0.0
    assert queries.last_updated(path) is None
    db = Database(path)
    before = queries.data_version(path)
    os.utime(path, (before - 10, before - 10))
    before = queries.data_version(path)
    assert queries.data_version(path) == before  # reading changes nothing
    read_query(path, "SELECT * FROM checkpoints")
    assert queries.data_version(path) == before
    now = datetime.now()
    row = {"checkpoint": "/cp", "query_id": "q", "first_seen": now, "last_scan": now}
    row["pinned_conf"] = None
    db.record_scan(ScanWrite(root="/cp", now=now, metadata_path="/cp/metadata", checkpoint=row))
    assert queries.data_version(path) > before
    assert queries.last_updated(path) is not None


def test_rate_seconds_become_rows_where_progress_counts_them() -> None:
    inputs = queries.input_from_offsets(_offsets("4", "9", "15")).assign(unit=queries.RATE_SECONDS)
    # numInputRows of batch 1 only (progress of batch 2 not ingested yet); a retry of batch 1
    # in a second run counts, as Spark reports it last.
    events = pd.DataFrame({"batch_id": [1, 1, 0], "num_input_rows": [240.0, 250.0, 0.0]})
    out = queries.rate_rows(inputs, events)
    assert list(out["amount"]) == [250.0, 6.0]
    assert list(out["unit"]) == ["rows", queries.RATE_SECONDS]
    # Two sources: numInputRows is their sum, so neither gets it.
    two = pd.concat([inputs, inputs.assign(source="source 1")])
    assert queries.rate_rows(two, events).equals(two)
    assert queries.rate_rows(inputs, events.iloc[:0]).equals(inputs)


def test_rate_rows_beside_another_source_come_from_its_own_progress_entry() -> None:
    # A rate source (id 0) joined with a Kafka source (id 1): numInputRows sums both, so only
    # the rate source's entry of Spark's per-source list can say its rows.
    frame = pd.DataFrame(
        {
            "batch_id": [0, 1, 2],
            "source_offsets": [
                json.dumps(
                    [
                        {"source_id": "0", "offset": rate},
                        {"source_id": "1", "offset": json.dumps({"t": {"0": kafka}})},
                    ]
                )
                for rate, kafka in (("4", 10), ("9", 30), ("15", 31))
            ],
        }
    )
    inputs = queries.input_from_offsets(frame)
    inputs.loc[inputs["source"] == "source 0", "unit"] = queries.RATE_SECONDS
    sources = [
        {"description": "RateStreamV2[rowsPerSecond=50, rampUpTimeSeconds=0]", "numInputRows": 250},
        {"description": "KafkaV2[Subscribe[t]]", "numInputRows": 20},
    ]
    events = pd.DataFrame(
        {"batch_id": [1], "num_input_rows": [270.0], "sources": [json.dumps(sources)]}
    )
    out = queries.rate_rows(inputs, events)
    rate = out[out["source"] == "source 0"]
    assert list(rate["amount"]) == [250.0, 6.0]
    assert list(rate["unit"]) == ["rows", queries.RATE_SECONDS]
    assert list(out[out["source"] == "source 1"]["amount"]) == [20, 1]
    # Two rate sources: which entry is which source id is not said, so neither gets rows.
    both = json.dumps([sources[0], sources[0]])
    assert queries.rate_rows(inputs, events.assign(sources=[both])).equals(inputs)
