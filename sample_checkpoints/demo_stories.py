"""The demo stories: small checkpoints, each written by a real PySpark query, each showing one
thing the dashboard and a health rule are for (``sample_checkpoints/demo/<story>/``).

Run through ``generate.py --demo`` (every story, each in its own Spark process, because some
confs such as ``maintenanceInterval`` are per JVM), or one story::

    .venv/bin/python sample_checkpoints/generate.py --demo
    .venv/bin/python sample_checkpoints/generate.py --demo unbounded-state

Input rows are seeded; event time starts at 2024-01-01T00:00:00Z and advances five minutes per
batch. Processing time (``batchTimestampMs``) is the time the script ran: the demo is as old
as its last regeneration, which is why ``make run`` judges it with ``demo.toml``.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import generate as g

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DEMO = g.HERE / "demo"
DEMO_EVENTLOGS = g.HERE / "eventlogs" / "demo"
LATE_ROWS = "late-rows"

SESSION_SCHEMA = "session STRING, ts BIGINT, amount DOUBLE"
READING_SCHEMA = "sensor STRING, ts BIGINT, value DOUBLE"
HOT_AD = 7


# --------------------------------------------------------------------------- input data


def new_sessions(batch: int) -> g.Rows:
    """200 events of 200 sessions never seen before: every batch adds keys, none leave."""
    rng = random.Random(f"sessions-{batch}")
    return [
        {"session": f"s{batch:02d}-{i:03d}", "ts": g.event_ts(rng, batch), "amount": 1.0}
        for i in range(200)
    ]


def readings(sensors: int, per_batch: int) -> Callable[[int], g.Rows]:
    """``per_batch`` readings a batch from ``sensors`` sensors, all on time."""

    def rows(batch: int) -> g.Rows:
        rng = random.Random(f"readings-{batch}")
        return [
            {
                "sensor": f"sensor-{rng.randrange(sensors):02d}",
                "ts": g.event_ts(rng, batch),
                "value": round(rng.uniform(0, 50), 2),
            }
            for _ in range(per_batch)
        ]

    return rows


def hot_impressions(batch: int) -> g.Rows:
    """A viral ad: 300 impressions a batch for ad 7, a handful for each of ads 0..6."""
    rng = random.Random(f"hot-imp-{batch}")
    ads = [HOT_AD] * 300 + [rng.randrange(7) for _ in range(10)]
    return [
        {"id": batch * 1000 + i, "ad_id": ad, "ts": g.event_ts(rng, batch)}
        for i, ad in enumerate(ads)
    ]


def hot_clicks(batch: int) -> g.Rows:
    """Clicks on one impression in ten, one to five minutes later."""
    rng = random.Random(f"hot-click-{batch}")
    return [
        {"id": imp["id"], "ad_id": imp["ad_id"], "ts": imp["ts"] + rng.randint(60, 300)}
        for imp in hot_impressions(batch)[::10]
    ]


# --------------------------------------------------------------------------- queries


def sessions_without_watermark(streams: g.Streams) -> DataFrame:
    """A running total per session id, with no watermark: Spark can never drop a session."""
    from pyspark.sql import functions as F

    return (
        streams["events"]
        .groupBy("session")
        .agg(F.count(F.lit(1)).alias("events"), F.sum("amount").alias("total"))
    )


def sensor_windows(streams: g.Streams) -> DataFrame:
    """Ten-minute averages per sensor with a ten-minute watermark: state stays bounded."""
    from pyspark.sql import functions as F

    return (
        g.with_event_time(streams["events"])
        .groupBy(F.window("event_time", "10 minutes"), "sensor")
        .agg(F.count(F.lit(1)).alias("n"), F.avg("value").alias("avg_value"))
    )


# --------------------------------------------------------------------------- catalogue


@dataclass(frozen=True)
class Story:
    """One demo checkpoint: its query, its input, and what it should make StateGlass say."""

    name: str
    provider: str
    summary: str
    expect: str  # the rule and status it exists to show, for the README and the test
    build: Callable[[g.Streams], DataFrame]
    inputs: dict[str, g.Input]
    batches: int
    partitions: int = 2
    output_mode: str = "update"
    conf: dict[str, str] = field(default_factory=dict)


STORIES = (
    Story(
        "unbounded-state",
        "hdfs",
        "running count per session id, no watermark; 200 new sessions every batch",
        "unbounded_state WARN: keys grow every batch and none are removed",
        sessions_without_watermark,
        {"events": g.Input(SESSION_SCHEMA, new_sessions)},
        batches=10,
    ),
    Story(
        "skewed-join",
        "hdfs",
        "impressions LEFT OUTER JOIN clicks on ad_id within 15 min (10 min watermarks); "
        f"ad {HOT_AD} gets 300 impressions a batch, the others about 1",
        "partition_skew WARN: the partition of the hot ad holds most of the join state",
        g.ad_join,
        {
            "impressions": g.Input(g.AD_SCHEMA, hot_impressions),
            "clicks": g.Input(g.AD_SCHEMA, hot_clicks),
        },
        batches=8,
        partitions=4,
        output_mode="append",
    ),
    Story(
        "snapshot-lag",
        "hdfs",
        "ten-minute averages per sensor; minDeltasForSnapshot 1000 and maintenanceInterval "
        "1 h in the job, so no snapshot came due (Spark does not pin either in the checkpoint: "
        "StateGlass judges against the default 10 unless `[spark]` says otherwise)",
        "snapshot_lag WARN: a restart replays every delta, no snapshot to start from",
        sensor_windows,
        {"events": g.Input(READING_SCHEMA, readings(6, 12))},
        batches=24,
        partitions=1,
        conf={
            "spark.sql.streaming.stateStore.maintenanceInterval": "1h",
            # A store unloaded mid-run (a busy executor) still runs maintenance once.
            "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1000",
        },
    ),
    Story(
        "purged-history",
        "hdfs",
        "ten-minute averages per sensor over 20 batches with minBatchesToRetain 3: "
        "Spark purged the older batches' files",
        "retention WARN; the pages say where history starts (first readable version)",
        sensor_windows,
        {"events": g.Input(READING_SCHEMA, readings(6, 12))},
        batches=20,
        conf={"spark.sql.streaming.minBatchesToRetain": "3"},
    ),
    Story(
        "leaking-windows",
        "hdfs",
        "ten-minute averages per sensor with a ten-minute watermark, written in complete "
        "output mode: Spark never evicts in complete mode, so every closed window stays",
        "state_leak WARN: windows the watermark has passed are still in the state; the "
        "Health page's Plan a fix drops them (walk-through: README, Fix the state)",
        sensor_windows,
        {"events": g.Input(READING_SCHEMA, readings(4, 8))},
        batches=8,
        output_mode="complete",
    ),
    Story(
        "healthy",
        "hdfs",
        "ten-minute averages per sensor with a ten-minute watermark",
        "every rule OK",
        sensor_windows,
        {"events": g.Input(READING_SCHEMA, readings(8, 16))},
        batches=12,
    ),
)
# Written by progress_query.py (it needs Spark's event log on), not by the loop above.
LATE_ROWS_SUMMARY = (
    "windowed count (10 s windows, 5 s watermark) whose later batches carry rows behind the "
    "watermark; its Spark event log is in eventlogs/demo/"
)
LATE_ROWS_EXPECT = "late_rows WARN (from the event log): rows dropped by the watermark"


# --------------------------------------------------------------------------- running


def run_story(story: Story) -> None:
    """Run one story's query in this process (a fresh Spark session) into ``DEMO/<name>``."""
    spark = g.spark_session(f"stateglass-demo-{story.name}")
    spark.conf.set("spark.sql.shuffle.partitions", str(story.partitions))
    for key, value in story.conf.items():
        spark.conf.set(key, value)
    sample = g.Sample(story.name, story.provider, story.summary, story.build, story.inputs)
    target = DEMO / story.name
    scratch = Path(tempfile.mkdtemp(prefix=f"stateglass-demo-{story.name}-"))
    try:
        g.run_sample(
            spark, replace(sample, output_mode=story.output_mode), target, scratch, story.batches
        )
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def run_late_rows() -> None:
    """The late-rows story and its event log, through progress_query.py."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        subprocess.run(
            [
                sys.executable,
                str(g.HERE / "progress_query.py"),
                "--out",
                str(out),
                "--provider",
                "hdfs",
            ],
            check=True,
        )
        for target in (DEMO / LATE_ROWS, DEMO_EVENTLOGS):
            shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(out / "checkpoint", DEMO / LATE_ROWS)
        shutil.copytree(out / "eventlog", DEMO_EVENTLOGS)


def generate_demo(names: list[str]) -> None:
    """Regenerate the chosen stories (all when ``names`` is empty), each in its own process."""
    known = [s.name for s in STORIES] + [LATE_ROWS]
    unknown = sorted(set(names) - set(known))
    if unknown:
        sys.exit(f"unknown demo stories {unknown}; known: {', '.join(known)}")
    for name in names or known:
        started = time.monotonic()
        print(f"[demo] {name} ...", flush=True)
        if name == LATE_ROWS:
            run_late_rows()
        else:
            subprocess.run(
                [sys.executable, str(g.HERE / "generate.py"), "--demo-story", name], check=True
            )
        print(f"[demo] {name} done in {time.monotonic() - started:.0f}s", flush=True)


def story(name: str) -> Story:
    return next(s for s in STORIES if s.name == name)


# --------------------------------------------------------------------------- README

README_START = "<!-- demo stories: written by demo_stories.py -->"
README_END = "<!-- end of demo stories -->"


def demo_markdown() -> str:
    """The README section listing every story and what it should make StateGlass say."""
    rows = [
        f"| [`demo/{s.name}`](demo/{s.name}) | {s.summary} | {g.PROVIDER_LABELS[s.provider]}, "
        f"{s.partitions} partition(s), {s.batches} batches | {s.expect} |"
        for s in STORIES
    ]
    rows.append(
        f"| [`demo/{LATE_ROWS}`](demo/{LATE_ROWS}) | {LATE_ROWS_SUMMARY} | "
        f"HDFSBackedStateStoreProvider, 2 partition(s), 5 batches | {LATE_ROWS_EXPECT} |"
    )
    return "\n".join(
        [
            README_START,
            "## The demo stories (`demo/`)",
            "",
            "Each checkpoint under `demo/` is written by a real PySpark query of",
            "[`demo_stories.py`](demo_stories.py) (`generate.py --demo`) to show one thing a",
            "health rule and the pages are for. `tests/e2e/test_demo.py` checks that each does.",
            "",
            "| story | query | store | what StateGlass should say |",
            "|---|---|---|---|",
            *rows,
            "",
            DEMO_AGE_NOTE,
            README_END,
        ]
    )


DEMO_AGE_NOTE = """\
`skewed-join` is also the demo's stream-stream join: one story, two things to see. The
transformWithState story is [`spark-4.3/tws-rocks-cl`](#spark-43tws-rocks-cl): value, list
and map state per user, cleared by an event-time timer (its `unbounded_state` finding counts
the removals; every rule OK).

**The demo's age.** The Overview's "last batch ran" and the report's last batch are the
offsets' `batchTimestampMs`, i.e. when `generate.py --demo` ran, not the files' modification
times (a clone's are all fresh). So the demo looks as old as it is. The `stalled_query` rule
measures from the last commit file's time, so in a clone it would say OK for five minutes and
then call every story stalled, which says nothing about the stories. `make run` therefore opens
the dashboard with [`demo.toml`](demo.toml), which turns `stalled_query` and `stuck_batch` off
for these finished runs (the Health page names them); `stateglass check --config
sample_checkpoints/demo.toml` gives the same verdicts on the command line. Nothing else is
adjusted: no time is faked."""


def update_readme(readme: Path) -> None:
    """Replace (or append) the demo section of ``readme``."""
    text = readme.read_text()
    if README_START in text:
        head, _, rest = text.partition(README_START)
        _, _, tail = rest.partition(README_END)
        text = head + demo_markdown() + tail
    else:
        text = text.rstrip("\n") + "\n\n" + demo_markdown() + "\n"
    readme.write_text(text)
