"""Regenerate the sample Structured Streaming checkpoints with real PySpark queries.

Every checkpoint under ``sample_checkpoints/<tag>/<name>/`` is written by a real streaming
query fed from small JSON files that this script writes one batch at a time into a temporary
directory (so only checkpoints land in the repository). Each file is followed by
``processAllAvailable()``; no-data batches are disabled, so batch N is exactly file N and
watermark eviction happens in the next data batch. The input is seeded, so state *contents*
are reproducible; file names inside RocksDB checkpoints, query ids and batch timestamps are not.

Usage (from the repository root)::

    python sample_checkpoints/generate.py                  # everything, then verify + README
    python sample_checkpoints/generate.py --tag spark-4.3  # one set, with this interpreter
    python sample_checkpoints/generate.py --tag spark-4.3 --only agg-hdfs join-hdfs
    python sample_checkpoints/generate.py --verify         # re-read all, rewrite README.md
    python sample_checkpoints/generate.py --progress-sample  # window-progress + its event log
    python sample_checkpoints/generate.py --demo           # the demo stories (demo_stories.py)

The default run regenerates ``spark-4.3`` with the current interpreter (which must have
pyspark 4.3) and ``spark-3.5`` with ``$SPARK35_PYTHON`` (default ``.venv35/bin/python``, which
``make test`` builds; skipped with a message when missing), each in its own process, then
reads every checkpoint back with Spark 4.3's State Data Source and rewrites
``sample_checkpoints/README.md``. Each regenerated checkpoint directory is deleted first.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.state import GroupState
    from pyspark.sql.types import DataType, StructType

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
TAGS = ("spark-4.3", "spark-3.5")
SPARK35_PYTHON = os.environ.get("SPARK35_PYTHON", str(HERE.parent / ".venv35" / "bin" / "python"))

NUM_BATCHES = 12
SHUFFLE_PARTITIONS = 4
BASE_EPOCH = 1_704_067_200  # 2024-01-01T00:00:00Z
BATCH_SPAN_S = 300  # each input file covers the next five minutes of event time
MINUTE_MS = 60_000
IDLE_TIMEOUT_MS = 5 * MINUTE_MS  # per-user state of fmgws/tws expires after this

STATE_PKG = "org.apache.spark.sql.execution.streaming.state"
PROVIDERS = {
    "hdfs": (f"{STATE_PKG}.HDFSBackedStateStoreProvider", False),
    "rocks": (f"{STATE_PKG}.RocksDBStateStoreProvider", False),
    "rocks-cl": (f"{STATE_PKG}.RocksDBStateStoreProvider", True),
}
PROVIDER_LABELS = {
    "hdfs": "HDFSBackedStateStoreProvider",
    "rocks": "RocksDBStateStoreProvider",
    "rocks-cl": "RocksDBStateStoreProvider + changelog checkpointing",
}

SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "100ms",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
}

GROUPS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", None)
TAG_WORDS = ("red", "green", "blue", "cyan")
ATTR_KEYS = ("a", "b", "c", "d")
KINDS = ("view", "click", "buy")
USERS = tuple(f"user{i:02d}" for i in range(16))

Rows = list[dict[str, Any]]
Streams = dict[str, "DataFrame"]


# --------------------------------------------------------------------------- input data


def event_ts(rng: random.Random, batch: int) -> int:
    """An epoch second inside the event-time span of ``batch``."""
    return BASE_EPOCH + batch * BATCH_SPAN_S + rng.randrange(BATCH_SPAN_S)


def maybe(rng: random.Random, value: Any, null_ratio: float = 0.2) -> Any:
    """``value``, or None for roughly ``null_ratio`` of the calls."""
    return None if rng.random() < null_ratio else value


def rich_rows(batch: int) -> Rows:
    """Rows for the aggregations; the late row of batch >= 3 is dropped by the watermark."""
    rng = random.Random(f"rich-{batch}")
    rows = [rich_row(rng, batch * 100 + i, event_ts(rng, batch)) for i in range(12)]
    if batch >= 3:
        rows.append(rich_row(rng, batch * 100 + 99, BASE_EPOCH + (batch - 3) * BATCH_SPAN_S))
    return rows


def rich_row(rng: random.Random, row_id: int, ts: int) -> dict[str, Any]:
    """One input row with nullable nested fields."""
    attrs = {k: rng.randint(0, 99) for k in rng.sample(ATTR_KEYS, k=rng.randint(1, 3))}
    return {
        "id": row_id,
        "ts": ts,
        "grp": rng.choice(GROUPS),
        "qty": rng.randint(1, 30_000),
        "price": f"{rng.randrange(10**15)}.{rng.randrange(10**10):010d}",
        "amount": round(rng.uniform(0, 1000), 3),
        "ratio": round(rng.random(), 4),
        "flag": rng.random() < 0.3,
        "tags": maybe(rng, rng.sample(TAG_WORDS, k=rng.randint(0, 3))),
        "attrs": maybe(rng, attrs),
        "note": maybe(rng, f"note-{row_id}", 0.3),
    }


RICH_SCHEMA = (
    "id BIGINT, ts BIGINT, grp STRING, qty INT, price STRING, amount DOUBLE, ratio DOUBLE, "
    "flag BOOLEAN, tags ARRAY<STRING>, attrs MAP<STRING, INT>, note STRING"
)
EVENT_SCHEMA = "id BIGINT, user STRING, ts BIGINT, kind STRING, amount DOUBLE"
AD_SCHEMA = "id BIGINT, ad_id INT, ts BIGINT"


def user_events(seed: str, batch: int, users: int, count: int) -> Rows:
    """``count`` events of the first ``users`` users inside the span of ``batch``."""
    rng = random.Random(f"{seed}-{batch}")
    return [
        {
            "id": batch * 100 + i,
            "user": rng.choice(USERS[:users]),
            "ts": event_ts(rng, batch),
            "kind": rng.choice(KINDS),
            "amount": round(rng.uniform(1, 100), 2),
        }
        for i in range(count)
    ]


def dedup_rows(batch: int) -> Rows:
    """New events plus exact repeats from this batch and the previous one."""
    rows = user_events("dedup", batch, 8, 10)
    repeats = rows[:2] + (user_events("dedup", batch - 1, 8, 10)[:4] if batch else [])
    return rows + repeats


def session_rows(batch: int) -> Rows:
    """Bursts per user; a user skipping a batch closes its session (gap five minutes)."""
    rng = random.Random(f"session-{batch}")
    rows: Rows = []
    for user in USERS[:8]:
        if rng.random() < 0.4:
            continue
        start = event_ts(rng, batch)
        for i in range(rng.randint(1, 3)):
            rows.append(
                {
                    "id": batch * 100 + len(rows),
                    "user": user,
                    "ts": min(start + 40 * i, BASE_EPOCH + (batch + 1) * BATCH_SPAN_S - 1),
                    "kind": rng.choice(KINDS),
                    "amount": round(rng.uniform(1, 100), 2),
                }
            )
    return rows


def impressions(batch: int) -> Rows:
    """Six ad impressions per batch over eight ad ids (so join keys repeat)."""
    rng = random.Random(f"imp-{batch}")
    return [
        {"id": batch * 100 + i, "ad_id": rng.randrange(8), "ts": event_ts(rng, batch)}
        for i in range(6)
    ]


def clicks(batch: int) -> Rows:
    """Clicks on half of the batch's impressions, some too late to match."""
    rng = random.Random(f"click-{batch}")
    chosen = rng.sample(impressions(batch), k=3)
    return [
        {"id": imp["id"], "ad_id": imp["ad_id"], "ts": imp["ts"] + rng.randint(10, 1200)}
        for imp in chosen
    ]


# --------------------------------------------------------------------------- queries


def rich_aggregation(streams: Streams) -> DataFrame:
    """Windowed aggregation whose key and value schemas cover most Spark SQL types."""
    from pyspark.sql import functions as F

    ev = streams["events"]
    event_time = F.timestamp_seconds("ts")
    typed = ev.select(
        event_time.alias("event_time"),
        "grp",
        F.struct(F.length("grp").alias("code"), F.upper("grp").alias("label")).alias("dim"),
        F.to_date(event_time).alias("day"),
        F.date_add(F.to_date(event_time), F.col("qty") % 3).alias("due"),
        F.col("price").cast("decimal(38,10)").alias("price"),
        F.col("amount").cast("decimal(9,2)").alias("unit"),
        "amount",
        F.col("ratio").cast("float").alias("ratio"),
        "qty",
        F.col("qty").cast("short").alias("qty_s"),
        (F.col("qty") % 128).cast("byte").alias("qty_b"),
        "flag",
        F.when(F.col("id") % 5 != 0, F.unhex(F.format_string("%08X", "id"))).alias("payload"),
        "tags",
        "attrs",
        F.struct("note", F.struct("qty", "tags").alias("inner")).alias("detail"),
        event_time.cast("timestamp_ntz").alias("local_time"),
    )
    return (
        typed.withWatermark("event_time", "10 minutes")
        .groupBy(F.window("event_time", "10 minutes"), "grp", "dim", "day")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("price").alias("total_price"),
            F.avg("amount").alias("avg_amount"),
            F.min("unit").alias("min_unit"),
            F.max("due").alias("max_due"),
            F.max("event_time").alias("last_seen"),
            F.max("local_time").alias("last_local"),
            F.max("payload").alias("max_payload"),
            F.first("tags").alias("first_tags"),
            F.first("attrs").alias("first_attrs"),
            F.last("detail").alias("last_detail"),
            F.max("ratio").alias("max_ratio"),
            F.max("qty_s").alias("max_qty_s"),
            F.max("qty_b").alias("max_qty_b"),
            F.max("qty").alias("max_qty"),
            F.sum("qty").alias("sum_qty"),
            F.max("flag").alias("any_flag"),
        )
    )


def with_event_time(df: DataFrame, delay: str = "10 minutes") -> DataFrame:
    """Add ``event_time`` from the epoch-second ``ts`` column and a watermark on it."""
    from pyspark.sql import functions as F

    return df.withColumn("event_time", F.timestamp_seconds("ts")).withWatermark("event_time", delay)


def deduplication(streams: Streams) -> DataFrame:
    """dropDuplicates over (user, id, event_time) with a watermark."""
    return with_event_time(streams["events"]).dropDuplicates(["user", "id", "event_time"])


def ad_join(streams: Streams) -> DataFrame:
    """Left outer stream-stream join of impressions and clicks within 15 minutes."""
    from pyspark.sql import functions as F

    imps = with_event_time(streams["impressions"]).select(
        F.col("id").alias("imp_id"), "ad_id", F.col("event_time").alias("imp_time")
    )
    clks = with_event_time(streams["clicks"]).select(
        F.col("id").alias("click_id"),
        F.col("ad_id").alias("click_ad_id"),
        F.col("event_time").alias("click_time"),
    )
    cond = (
        (F.col("ad_id") == F.col("click_ad_id"))
        & (F.col("click_time") >= F.col("imp_time"))
        & (F.col("click_time") <= F.col("imp_time") + F.expr("INTERVAL 15 MINUTES"))
    )
    return imps.join(clks, cond, "leftOuter")


PANDAS_STATE_SCHEMA = (
    "events LONG, total DOUBLE, first_seen TIMESTAMP, last_seen TIMESTAMP, kinds STRING"
)
PANDAS_OUTPUT_SCHEMA = "user STRING, events LONG, total DOUBLE, status STRING"
PANDAS_OUTPUT_COLUMNS = ["user", "events", "total", "status"]


def status_frame(user: str, events: int, total: float, status: str) -> pd.DataFrame:
    """One output row of the pandas stateful queries (PANDAS_OUTPUT_SCHEMA)."""
    import pandas as pd

    return pd.DataFrame([(user, events, total, status)], columns=PANDAS_OUTPUT_COLUMNS)


def track_user(
    key: tuple[str], pdfs: Iterator[pd.DataFrame], state: GroupState
) -> Iterator[pd.DataFrame]:
    """applyInPandasWithState body: running totals, dropped IDLE_TIMEOUT_MS after the last event."""
    import pandas as pd

    (user,) = key
    if state.hasTimedOut:
        events, total = state.get[0], state.get[1]
        state.remove()
        yield status_frame(user, events, total, "expired")
        return
    events, total, first, last, kinds = state.get if state.exists else (0, 0.0, None, None, "")
    for pdf in pdfs:
        events += len(pdf)
        total += float(pdf["amount"].sum())
        lo, hi = pdf["event_time"].min(), pdf["event_time"].max()
        first = lo if first is None else min(pd.Timestamp(first), lo)
        last = hi if last is None else max(pd.Timestamp(last), hi)
        kinds = ",".join(sorted(set(filter(None, kinds.split(","))) | set(pdf["kind"])))
    state.update((events, total, first, last, kinds))
    expiry = pd.Timestamp(last).value // 1_000_000 + IDLE_TIMEOUT_MS
    state.setTimeoutTimestamp(max(expiry, state.getCurrentWatermarkMs() + 1))
    yield status_frame(user, events, total, "active")


def pandas_with_state(streams: Streams) -> DataFrame:
    """applyInPandasWithState with an event-time timeout (PySpark's flatMapGroupsWithState)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    return (
        with_event_time(streams["events"], "5 minutes")
        .groupBy("user")
        .applyInPandasWithState(
            track_user,
            PANDAS_OUTPUT_SCHEMA,
            PANDAS_STATE_SCHEMA,
            "update",
            GroupStateTimeout.EventTimeTimeout,
        )
    )


def sessions(streams: Streams) -> DataFrame:
    """Session windows with a five-minute gap per user."""
    from pyspark.sql import functions as F

    return (
        with_event_time(streams["events"])
        .groupBy(F.session_window("event_time", "5 minutes"), "user")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.sum("amount").alias("total"),
            F.max("kind").alias("max_kind"),
        )
    )


def make_tws_processor() -> Any:
    """Build the StatefulProcessor class lazily (pyspark is imported only at run time)."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class UserTracker(StatefulProcessor):
        """Value, list and map state per user, cleared by an event-time timer."""

        def init(self, handle: Any) -> None:
            self.handle = handle
            self.stats = handle.getValueState("stats", "events LONG, total DOUBLE, last_ms LONG")
            self.recent = handle.getListState("recent", "ts TIMESTAMP, amount DOUBLE")
            self.by_kind = handle.getMapState("by_kind", "kind STRING", "n LONG, total DOUBLE")

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            (user,) = key
            events, total, last_ms = self.stats.get() if self.stats.exists() else (0, 0.0, 0)
            for pdf in rows:
                events += len(pdf)
                total += float(pdf["amount"].sum())
                last_ms = max(last_ms, int(pdf["event_time"].max().value // 1_000_000))
                self.recent.appendList(list(zip(pdf["event_time"], pdf["amount"], strict=True)))
                for kind, group in pdf.groupby("kind"):
                    n, t = self.by_kind.getValue((kind,)) or (0, 0.0)
                    self.by_kind.updateValue((kind,), (n + len(group), t + group["amount"].sum()))
            self.recent.put(list(self.recent.get())[-3:])
            self.stats.update((events, total, last_ms))
            for timer in self.handle.listTimers():
                self.handle.deleteTimer(timer)
            self.handle.registerTimer(last_ms + IDLE_TIMEOUT_MS)
            yield status_frame(user, events, total, "active")

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
            (user,) = key
            events, total, _ = self.stats.get()
            self.stats.clear()
            self.recent.clear()
            self.by_kind.clear()
            yield status_frame(user, events, total, "expired")

        def close(self) -> None:
            pass

    return UserTracker()


def transform_with_state(streams: Streams) -> DataFrame:
    """transformWithStateInPandas with ValueState, ListState, MapState and event-time timers."""
    return (
        with_event_time(streams["events"], "5 minutes")
        .groupBy("user")
        .transformWithStateInPandas(
            make_tws_processor(), PANDAS_OUTPUT_SCHEMA, "Update", "EventTime"
        )
    )


# --------------------------------------------------------------------------- catalogue


@dataclass(frozen=True)
class Input:
    """One file source: its schema and the rows written for each batch."""

    schema: str
    rows: Callable[[int], Rows]


@dataclass(frozen=True)
class Sample:
    """One checkpoint to generate."""

    name: str
    provider: str
    summary: str
    build: Callable[[Streams], DataFrame]
    inputs: dict[str, Input]
    output_mode: str = "update"
    tags: tuple[str, ...] = ("spark-4.3",)
    extra_conf: dict[str, str] = field(default_factory=dict)


RICH = {"events": Input(RICH_SCHEMA, rich_rows)}
SAMPLES = (
    Sample(
        "agg-hdfs",
        "hdfs",
        "windowed groupBy (10 min tumbling, 10 min watermark) with rich key/value types",
        rich_aggregation,
        RICH,
        tags=TAGS,
    ),
    Sample("agg-rocks", "rocks", "same as agg-hdfs", rich_aggregation, RICH, tags=TAGS),
    Sample("agg-rocks-cl", "rocks-cl", "same as agg-hdfs", rich_aggregation, RICH),
    Sample(
        "dedup-hdfs",
        "hdfs",
        "dropDuplicates(user, id, event_time) with a 10 min watermark",
        deduplication,
        {"events": Input(EVENT_SCHEMA, dedup_rows)},
        output_mode="append",
    ),
    Sample(
        "join-hdfs",
        "hdfs",
        "impressions LEFT OUTER JOIN clicks on ad_id within 15 min, watermarks 10 min",
        ad_join,
        {
            "impressions": Input(AD_SCHEMA, impressions),
            "clicks": Input(AD_SCHEMA, clicks),
        },
        output_mode="append",
    ),
    Sample(
        "fmgws-hdfs",
        "hdfs",
        "applyInPandasWithState per user, 5 min watermark,"
        " EventTimeTimeout 5 min after the last event removes the state",
        pandas_with_state,
        {"events": Input(EVENT_SCHEMA, lambda b: user_events("fmgws", b, 16, 6))},
    ),
    Sample(
        "session-rocks-cl",
        "rocks-cl",
        "session_window(event_time, 5 min gap) per user, 10 min watermark",
        sessions,
        {"events": Input(EVENT_SCHEMA, session_rows)},
        output_mode="append",
    ),
    Sample(
        "tws-rocks-cl",
        "rocks-cl",
        "transformWithStateInPandas per user: ValueState, ListState, MapState;"
        " an event-time timer 5 min after the last event (5 min watermark) clears them",
        transform_with_state,
        {"events": Input(EVENT_SCHEMA, lambda b: user_events("tws", b, 16, 6))},
    ),
)


# --------------------------------------------------------------------------- running


def spark_session(app: str) -> SparkSession:
    """A local session with the sample-wide configuration."""
    os.environ["TZ"] = "UTC"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    time.tzset()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName(app)
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def write_batch(directory: Path, batch: int, rows: Rows) -> None:
    """Write one JSON-lines file atomically (hidden name first, then rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / f".batch-{batch:03d}.json.tmp"
    staging.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    os.replace(staging, directory / f"batch-{batch:03d}.json")


def configure(spark: SparkSession, sample: Sample) -> None:
    """Point the session at the sample's state store provider."""
    provider_class, changelog = PROVIDERS[sample.provider]
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider_class)
    spark.conf.set(
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
        str(changelog).lower(),
    )
    for key, value in sample.extra_conf.items():
        spark.conf.set(key, value)


def run_sample(
    spark: SparkSession, sample: Sample, target: Path, scratch: Path, batches: int = NUM_BATCHES
) -> None:
    """Delete ``target``, then run the query for ``batches`` input files into it."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    configure(spark, sample)
    for name in sample.inputs:
        (scratch / name).mkdir(parents=True)
    streams = {
        name: spark.readStream.schema(inp.schema).json(str(scratch / name))
        for name, inp in sample.inputs.items()
    }
    query = (
        sample.build(streams)
        .writeStream.format("noop")
        .outputMode(sample.output_mode)
        .option("checkpointLocation", str(target))
        .start()
    )
    try:
        for batch in range(batches):
            for name, inp in sample.inputs.items():
                write_batch(scratch / name, batch, inp.rows(batch))
            query.processAllAvailable()
        time.sleep(1.5)  # let the maintenance thread upload snapshots for the last versions
    finally:
        query.stop()
    shutil.rmtree(scratch, ignore_errors=True)


def generate(tag: str, only: list[str]) -> None:
    """Regenerate the samples of ``tag`` with this interpreter's pyspark."""
    import pyspark

    expected = tag.removeprefix("spark-")
    if not pyspark.__version__.startswith(expected + "."):
        sys.exit(f"{tag} needs pyspark {expected}.x, this interpreter has {pyspark.__version__}")
    chosen = [s for s in SAMPLES if tag in s.tags and (not only or s.name in only)]
    spark = spark_session(f"stateglass-samples-{tag}")
    scratch_root = Path(tempfile.gettempdir()) / "stateglass-sample-input" / tag
    try:
        for sample in chosen:
            started = time.monotonic()
            print(f"[{tag}] {sample.name} ...", flush=True)
            run_sample(spark, sample, HERE / tag / sample.name, scratch_root / sample.name)
            print(f"[{tag}] {sample.name} done in {time.monotonic() - started:.0f}s", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(scratch_root, ignore_errors=True)


def run_tag_elsewhere(python: str, tag: str, only: list[str]) -> None:
    """Run ``--tag`` in a child interpreter, or say why not when it is missing."""
    names = [s.name for s in SAMPLES if tag in s.tags and (not only or s.name in only)]
    if not names:
        return
    if not Path(python).exists():
        print(f"skipping {tag}: interpreter {python} not found (set SPARK35_PYTHON)")
        return
    script = str(Path(__file__).resolve())
    subprocess.run([python, script, "--tag", tag, "--only", *names], check=True)


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class Store:
    """One readable unit: an operator's store, or one state variable of a TWS store."""

    operator: int
    operator_name: str
    store: str
    partitions: int
    variable: str | None = None

    @property
    def label(self) -> str:
        return self.store if self.variable is None else f"{self.store}/{self.variable}"


@dataclass
class StoreCount:
    """Rows Spark's State Data Source returned for one store at one batch."""

    store: Store
    rows: int
    types: set[str]


@dataclass
class Report:
    """What one checkpoint holds, for the README."""

    tag: str
    sample: Sample
    batches: list[int]
    counts: list[StoreCount]
    files: dict[str, int]
    size_kb: int


STATE_FILE_KINDS = (".delta", ".snapshot", ".zip", ".changelog", ".sst")


def type_names(dtype: DataType) -> set[str]:
    """Every type name appearing in ``dtype``, nested ones included."""
    from pyspark.sql.types import ArrayType, DecimalType, MapType, StructType

    if isinstance(dtype, StructType):
        return {"struct"}.union(*(type_names(f.dataType) for f in dtype.fields))
    if isinstance(dtype, ArrayType):
        return {"array"} | type_names(dtype.elementType)
    if isinstance(dtype, MapType):
        return {"map"} | type_names(dtype.keyType) | type_names(dtype.valueType)
    if isinstance(dtype, DecimalType):
        return {f"decimal({dtype.precision},{dtype.scale})"}
    return {dtype.simpleString()}


def state_types(schema: StructType) -> set[str]:
    """Types inside the columns of a statestore DataFrame, not counting the key/value wrappers."""
    from pyspark.sql.types import StructType

    names: set[str] = set()
    for column in schema.fields:
        if column.name == "partition_id":
            continue
        dtype = column.dataType
        fields = dtype.fields if isinstance(dtype, StructType) else []
        names |= (
            type_names(dtype)
            if not fields
            else set().union(*(type_names(f.dataType) for f in fields))
        )
    return names


def committed_batches(checkpoint: Path) -> list[int]:
    """Batch ids with a commit file."""
    return sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def file_kinds(checkpoint: Path) -> dict[str, int]:
    """Counts of state data files (not sidecars) by extension."""
    counts: dict[str, int] = {}
    for p in (checkpoint / "state").rglob("*"):
        if p.is_file() and p.suffix in STATE_FILE_KINDS and not p.name.endswith(".crc"):
            counts[p.suffix] = counts.get(p.suffix, 0) + 1
    return counts


def tree_size_kb(path: Path) -> int:
    """Apparent size of all files under ``path``, in KiB."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) // 1024


def stores_from_dirs(checkpoint: Path) -> list[Store]:
    """Stores found by listing ``state/`` (Spark 3.5 writes no operator metadata)."""
    stores = []
    for op_dir in sorted((checkpoint / "state").iterdir(), key=lambda p: p.name):
        parts = sorted(p for p in op_dir.iterdir() if p.name.isdigit())
        named = sorted(p.name for p in parts[0].iterdir() if p.is_dir() and "-" in p.name)
        for name in named or ["default"]:
            stores.append(Store(int(op_dir.name), "(no operator metadata)", name, len(parts)))
    return stores


def list_stores(spark: SparkSession, checkpoint: Path) -> list[Store]:
    """Stores (and TWS state variables) named by the checkpoint's operator metadata."""
    rows = spark.read.format("state-metadata").load(str(checkpoint)).collect()
    if not rows:
        return stores_from_dirs(checkpoint)
    stores = []
    for row in sorted(rows, key=lambda r: (r.operatorId, r.stateStoreName)):
        base = Store(row.operatorId, row.operatorName, row.stateStoreName, row.numPartitions)
        props = json.loads(row.asDict().get("operatorProperties") or "{}")
        variables = [v["stateName"] for v in props.get("stateVariables", [])]
        stores += [replace(base, variable=v) for v in variables] or [base]
    return stores


def count_store(spark: SparkSession, checkpoint: Path, batch: int, store: Store) -> StoreCount:
    """Load one store at ``batch`` with the statestore source and count its rows."""
    reader = (
        spark.read.format("statestore")
        .option("batchId", batch)
        .option("operatorId", store.operator)
        .option("storeName", store.store)
    )
    if store.variable is not None and store.variable.startswith("$"):
        reader = reader.option("readRegisteredTimers", "true")
    elif store.variable is not None:
        reader = reader.option("stateVarName", store.variable)
    df = reader.load(str(checkpoint))
    return StoreCount(store, df.count(), state_types(df.schema))


def inspect(spark: SparkSession, tag: str, sample: Sample) -> Report:
    """Count every store of one checkpoint at its last committed batch."""
    checkpoint = HERE / tag / sample.name
    batches = committed_batches(checkpoint)
    counts = [
        count_store(spark, checkpoint, batches[-1], s) for s in list_stores(spark, checkpoint)
    ]
    for c in counts:
        where = f"{tag}/{sample.name} batch {batches[-1]} op {c.store.operator}"
        print(f"{where} {c.store.label}: {c.rows} rows")
    return Report(tag, sample, batches, counts, file_kinds(checkpoint), tree_size_kb(checkpoint))


def verify() -> list[Report]:
    """Read every existing sample back with this interpreter's Spark."""
    spark = spark_session("stateglass-samples-verify")
    try:
        return [
            inspect(spark, tag, sample)
            for tag in TAGS
            for sample in SAMPLES
            if tag in sample.tags and (HERE / tag / sample.name).is_dir()
        ]
    finally:
        spark.stop()


# --------------------------------------------------------------------------- README


README_HEAD = """\
# Sample checkpoints

Real Structured Streaming checkpoints written by real PySpark queries, regenerated by
[`generate.py`](generate.py). Each directory `<tag>/<name>/` is a complete checkpoint
(`metadata`, `offsets/`, `commits/`, `sources/`, `state/`), Hadoop `.crc` sidecars included.

All queries read JSON files written by the script, one file per micro-batch
({batches} files, so batch N is file N: no-data batches are disabled with
`spark.sql.streaming.noDataMicroBatches.enabled=false`, so expired state is evicted by the
next data batch), with `spark.sql.shuffle.partitions={partitions}`,
`spark.sql.streaming.stateStore.minDeltasForSnapshot=2`,
`spark.sql.streaming.stateStore.maintenanceInterval=100ms` and session time zone UTC.
Event time starts at 2024-01-01T00:00:00Z and advances five minutes per file. The input is
seeded, so the state contents are reproducible; RocksDB file names, query ids and batch
timestamps are not. `sources/*` records the absolute paths of the (deleted) input files.

Regenerate (from the repository root, after `make install`):

    .venv/bin/python sample_checkpoints/generate.py            # both versions, verify, README
    .venv/bin/python sample_checkpoints/generate.py --tag spark-4.3 --only agg-hdfs
    SPARK35_PYTHON=/path/to/py-with-pyspark-3.5 .venv/bin/python sample_checkpoints/generate.py

`spark-4.2/repart-*` are checkpoints Spark 4.2.0 repartitioned offline
(`spark._streamingCheckpointManager.repartition`), written by
[`make_repartitioned.py`](make_repartitioned.py) with PySpark 4.2 in its own venv
(`/tmp/ps42/bin/python sample_checkpoints/make_repartitioned.py`): a RocksDB query runs batches
0..2, the repartition writes batch 3, the query runs batches 4..5. `repart-agg-up-cl`:
groupBy count and sum, 3 → 5 partitions, changelog checkpointing; `repart-agg-down`: the
same, 4 → 2, no changelog; `repart-dedup-down-cl`: dropDuplicates, 5 → 3, changelog. Their
queries have no watermark (every key stays, so it can be followed across the repartition).
The format: [docs/formats.md §11](../docs/formats.md).

`dynamodb/` is a query whose state lives in DynamoDB, through the provider in
`dynamodb/java` (a custom `providerClass`): `sample.tar.gz` is its checkpoint and
`tables.json` its two tables, exported. `make run` shows it beside the others:
`dynamodb/demo.py dashboard` starts moto's DynamoDB server on 127.0.0.1, loads `tables.json`,
unpacks the checkpoint into `.stateglass/dynamodb/` and points the dashboard at the server
through the standard AWS chain (`AWS_ENDPOINT_URL` and dummy credentials, in the dashboard's
environment only); the server stops with the dashboard. Without moto (it is in
requirements.txt) the other samples still show, and one line says why the DynamoDB one does
not. `make run-dynamodb` shows it alone; `dynamodb/demo.py generate` rewrites the sample
(needs `javac`). It is archived so that the sweeps over the samples above, which need no
server, do not find it.

The row counts below are what Spark 4.3's State Data Source
(`spark.read.format("statestore")`) returned for the last committed batch.

"""


def summary_row(r: Report) -> str:
    """One line of the overview table."""
    operators = sorted({f"{c.store.operator}:{c.store.operator_name}" for c in r.counts})
    partitions = sorted({c.store.partitions for c in r.counts})
    return (
        f"| [`{r.tag}/{r.sample.name}`](#{r.tag.replace('.', '')}{r.sample.name})"
        f" | {r.tag.removeprefix('spark-')} | {PROVIDER_LABELS[r.sample.provider]}"
        f" | {', '.join(operators)} | {'/'.join(map(str, partitions))} | {len(r.batches)}"
        f" | {r.size_kb} KiB |"
    )


def report_markdown(r: Report) -> str:
    """One checkpoint's section: query, files, and per-store row counts and types."""
    files = ", ".join(f"{n} `{k}`" for k, n in sorted(r.files.items()))
    lines = [
        f"### {r.tag}/{r.sample.name}",
        "",
        f"* Spark {r.tag.removeprefix('spark-')}, {PROVIDER_LABELS[r.sample.provider]}",
        f"* query: {r.sample.summary}; output mode {r.sample.output_mode}",
        f"* batches {r.batches[0]}..{r.batches[-1]}; state files: {files}",
        "",
        "| operator | store / state variable | partitions | rows at last batch | types inside |",
        "|---|---|---|---|---|",
    ]
    for c in r.counts:
        st = c.store
        types = ", ".join(sorted(c.types))
        lines.append(
            f"| {st.operator} `{st.operator_name}` | `{st.label}` | {st.partitions}"
            f" | {c.rows} | {types} |"
        )
    return "\n".join(lines) + "\n"


README_NOTES = """\
## The sample with an event log (`spark-4.3/window-progress`)

`spark-4.3/window-progress` is written by [`progress_query.py`](progress_query.py)
(`generate.py --progress-sample`), not by the loop above: a windowed count (10-second windows,
5-second watermark, RocksDB, 2 shuffle partitions) over four input files, some of whose rows
arrive behind the watermark and are dropped (`numRowsDroppedByWatermark`). No-data batches are
on. Spark's event log of that application is in `eventlogs/spark-4.3/` (outside the
checkpoint), with Spark 4's defaults: a rolling `eventlog_v2_*` directory, zstd. `make run`
passes it to the dashboard with `--progress`, so the progress tables and charts have data.

## Spark behaviour worth knowing

Observed while generating these samples (pyspark 4.3.0 and 3.5.7, Java 17):

* **State version = batch id + 1.** Batch 11 is `12.delta` / `12.changelog` / `12.zip`.
* **Snapshots are written next to deltas, by the maintenance thread**, not by the batch:
  with `minDeltasForSnapshot=2` the HDFS provider wrote `3/6/9/12.snapshot` beside the
  `.delta` of the same version. RocksDB without changelog uploads a `.zip` every version;
  with changelog checkpointing every version has a `.changelog` and every second one a `.zip`
  (versions 2, 4, ..., 12; but 1, 3, ..., 11 for transformWithState).
  RocksDB zips hold only `metadata`, `MANIFEST`, `CURRENT`, `OPTIONS` and an empty `.log`;
  the SST files live beside them in `SSTs/` as `<local-number>-<uuid>.sst`, mapped by the
  zip's `metadata` JSON.
* **Aggregation value columns are buffer names, not aliases, and repeat**: the agg samples'
  value schema is `count, sum, isEmpty, sum, count, min, max, ...`. `sum(decimal)` adds an
  `isEmpty` boolean, `first`/`last` add `valueSet`, `avg` stores `sum` and `count`.
  `sum(decimal(38,10))` keeps `decimal(38,10)`.
* **Spark 3.5.7 writes no operator metadata** (`state/<op>/_metadata/metadata` is absent), so
  the `state-metadata` source returns nothing for `spark-3.5/*`; Spark 4.3 writes it (v1),
  and for transformWithState a v2 file under `state/0/_metadata/v2/` whose
  `stateSchemaFilePaths` are **absolute `file:` URIs** to `state/0/_stateSchema/default/...`,
  i.e. the directory the sample was generated in. Resolve them relative to the checkpoint.
* **applyInPandasWithState** stores `struct<groupState: struct<...user state...>,
  timeoutTimestamp: bigint>` (the Scala flatMapGroupsWithState format 2 layout). An
  `ARRAY<STRING>` field in its state schema made the 4.3.0 Python worker fail while parsing the
  schema (`KeyError: 'elementType'` in `StructType.fromJson`), so the sample keeps scalars.
* **dropDuplicates** stores the key columns and a value of one `__dummy__` column of type
  `void` (NullType).
* **Session windows** key on the grouping columns plus `sessionStartTime`
  (`numColsPrefixKey` 1) and repeat the grouping column and the `session_window` struct in
  the value.
* **Stream-stream join** state format 2: `keyToNumValues` holds a `bigint` count per join key,
  `keyWithIndexToValue` the row plus a `matched` boolean, under `key` + `index`.
* **transformWithStateInPandas** keeps every state variable in one `default` store (RocksDB
  column families). Timers are read with `readRegisteredTimers=true`, not `stateVarName`.
  In the change feed, list-state appends show up as `append` (RocksDB merge), not `update`.
* **Offsets conf differs by version**: 4.3 records extra keys such as
  `spark.sql.streaming.stateStore.encodingFormat=unsaferow`,
  `...rocksdb.mergeOperatorVersion=2` and `...stateStore.rowChecksum.enabled=false`.
* **Disk usage**: the files are tiny but numerous, so `du -sh` (4 KiB blocks) reports about
  ten times the apparent size listed above.
"""


def write_readme(reports: list[Report]) -> None:
    """Rewrite README.md from the verification results."""
    overview = [
        "| checkpoint | Spark | provider | operators | partitions | batches | size |",
        "|---|---|---|---|---|---|---|",
        *(summary_row(r) for r in reports),
    ]
    README.write_text(
        README_HEAD.format(batches=NUM_BATCHES, partitions=SHUFFLE_PARTITIONS)
        + "## Checkpoints\n\n"
        + "\n".join(overview)
        + "\n\n"
        + "\n".join(report_markdown(r) for r in reports)
        + "\n"
        + README_NOTES
    )
    import demo_stories

    demo_stories.update_readme(README)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", choices=TAGS, help="regenerate only this set, in-process")
    parser.add_argument("--only", nargs="*", default=[], help="sample names to regenerate")
    parser.add_argument("--verify", action="store_true", help="only verify and rewrite README")
    parser.add_argument(
        "--progress-sample",
        action="store_true",
        help=f"only regenerate {PROGRESS_SAMPLE} and its event log",
    )
    parser.add_argument(
        "--demo",
        nargs="*",
        metavar="STORY",
        help="only regenerate the demo stories under demo/ (all, or the ones named)",
    )
    parser.add_argument("--demo-story", metavar="STORY", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# --------------------------------------------------------------------------- progress sample

# One checkpoint comes with the Spark event log of the query that wrote it (issue 12), written
# by progress_query.py (a windowed count with late rows, rolling zstd log: Spark 4's defaults).
# The log lives outside the checkpoint: StateGlass never reads foreign files inside one.
PROGRESS_SAMPLE = "spark-4.3/window-progress"
PROGRESS_EVENTLOGS = HERE / "eventlogs" / "spark-4.3"


def generate_progress_sample() -> None:
    """Regenerate ``PROGRESS_SAMPLE`` and ``PROGRESS_EVENTLOGS``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        subprocess.run(
            [sys.executable, str(HERE / "progress_query.py"), "--out", str(out), "--batches", "4"],
            check=True,
        )
        for target in (HERE / PROGRESS_SAMPLE, PROGRESS_EVENTLOGS):
            shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(out / "checkpoint", HERE / PROGRESS_SAMPLE)
        shutil.copytree(out / "eventlog", PROGRESS_EVENTLOGS)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.demo_story:
        import demo_stories

        demo_stories.run_story(demo_stories.story(args.demo_story))
        return 0
    if args.demo is not None:
        import demo_stories

        demo_stories.generate_demo(args.demo)
        demo_stories.update_readme(README)
        return 0
    if args.tag:
        generate(args.tag, args.only)
        return 0
    if args.progress_sample:
        generate_progress_sample()
        return 0
    if not args.verify:
        run_tag_elsewhere(sys.executable, "spark-4.3", args.only)
        run_tag_elsewhere(SPARK35_PYTHON, "spark-3.5", args.only)
        if not args.only:
            generate_progress_sample()
    write_readme(verify())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
