"""The report's charts: the dashboard's figure builders (``app.figures``), fed small frames.

A big store stays a small report that opens fast. Beyond :data:`MAX_COLUMNS` versions (or
batches) each chart keeps at most that many, and the report says so above the charts:

* states at a version (keys over versions, the partition × version heatmap): every n-th
  version, the newest included;
* events per version or batch (durations, intervals, input, key changes, bytes written,
  skew): in each run of n consecutive ones, the largest, so spikes stay visible and every
  point shown is a real version or batch whose hover tells the truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from stateglass.app import figures
from stateglass.app.report.model import ReportData, StoreData

MAX_COLUMNS = 250


@dataclass(frozen=True)
class Chart:
    """One figure and the sentence under it that says what it answers."""

    figure: go.Figure
    caption: str


@dataclass(frozen=True)
class ChartGroup:
    """The charts of one report section (the query, or one store)."""

    anchor: str
    title: str
    charts: tuple[Chart, ...]
    note: str = ""


def _step(ids: pd.Series, max_columns: int) -> int:
    if ids.empty:
        return 1
    return max(1, -(-(int(ids.max()) - int(ids.min()) + 1) // max_columns))


def every_nth_version(frame: pd.DataFrame, max_columns: int) -> tuple[pd.DataFrame, int]:
    """Rows of every n-th version counting back from the newest, so at most ``max_columns``.

    Returns the rows kept and n (1 when the frame already fits).
    """
    step = _step(frame["version"], max_columns) if not frame.empty else 1
    if step == 1:
        return frame, 1
    versions = frame["version"].astype("int64")
    return frame[(int(versions.max()) - versions) % step == 0], step


def largest_per_run(
    frame: pd.DataFrame,
    key: str,
    value: str | Sequence[str],
    max_columns: int,
    by: Sequence[str] = (),
) -> tuple[pd.DataFrame, int]:
    """In each run of n consecutive ``key`` values, the row with the largest ``value``.

    ``value`` may name several columns, whose sum is compared; ``by`` keeps one winner per
    group (e.g. per source). Every row of the winning ``key`` is kept (all kinds of a version).
    Returns the rows kept and n (1, and the frame as it is, when it already fits).
    """
    step = _step(frame[key], max_columns) if not frame.empty else 1
    if step == 1:
        return frame, 1
    columns = [value] if isinstance(value, str) else list(value)
    per_key = frame.groupby([*by, key], as_index=False)[columns].sum(min_count=1)
    # DuckDB gives nullable Int64 columns: compare as floats, with a missing value smallest.
    sizes = per_key[columns].astype("float64").sum(axis=1, min_count=1)
    per_key["_size"] = sizes.fillna(float("-inf"))
    last = int(frame[key].max())
    per_key["_run"] = (last - per_key[key].astype("int64")) // step
    winners = per_key.loc[per_key.groupby([*by, "_run"])["_size"].idxmax(), [*by, key]]
    return frame.merge(winners, on=[*by, key]), step


def query_charts(data: ReportData) -> ChartGroup:
    b = data.batches
    committed = b[b["committed"].astype(bool)]
    durations, step = largest_per_run(committed, "batch_id", "duration_ms", MAX_COLUMNS)
    # Pending and repartition batches are always shown, whatever the sampling kept.
    moved = b[b["partitions_before"].notna()] if "partitions_before" in b.columns else b[:0]
    timeline = (
        pd.concat([durations, b[~b["committed"].astype(bool)], moved])
        .drop_duplicates("batch_id")
        .sort_values("batch_id")
    )
    intervals, _ = largest_per_run(b, "batch_id", "interval_ms", MAX_COLUMNS)
    delays, _ = largest_per_run(b[b["watermark"].notna()], "batch_id", "delay_ms", MAX_COLUMNS)
    inputs, _ = largest_per_run(data.inputs, "batch_id", "amount", MAX_COLUMNS, by=["source"])
    note = ""
    if step > 1:
        note = (
            f"{len(b):,} batches: each chart shows the largest of every {step} consecutive "
            "batches, so spikes stay visible; pending batches are all shown."
        )
    return ChartGroup(
        anchor="query",
        title="Batches",
        note=note,
        charts=(
            Chart(
                figures.batch_timeline(timeline),
                "How long each batch took from writing its offsets to its commit; a red × "
                "marks a batch whose offsets are written but which has not committed, a "
                "dotted line a repartition (the state moved to another partition count).",
            ),
            Chart(
                figures.trigger_intervals(intervals),
                "Whether batches start on schedule: time between consecutive triggers.",
            ),
            Chart(
                figures.watermark_delay(delays),
                "How far event time (the watermark) lags processing time, batch by batch.",
            ),
            Chart(
                figures.input_per_batch(inputs),
                "How much each batch read, where the source offsets tell it.",
            ),
        ),
    )


def store_charts(store: StoreData) -> ChartGroup:
    cells, step = every_nth_version(store.versions, MAX_COLUMNS)
    changes, _ = largest_per_run(
        store.growth, "version", ["keys_added", "keys_updated", "keys_removed"], MAX_COLUMNS
    )
    files, _ = largest_per_run(store.files, "version", "bytes", MAX_COLUMNS)
    skew, _ = largest_per_run(store.skew, "version", "skew", MAX_COLUMNS)
    sst, _ = largest_per_run(
        store.sst, "version", ["sst_bytes_uploaded", "sst_bytes_reused"], MAX_COLUMNS
    )
    # The versions the charts draw (partitions reaching further back included).
    span = (
        None
        if store.versions.empty
        else (int(store.versions["version"].min()), int(store.versions["version"].max()))
    )
    note = ""
    if step > 1 and span is not None:
        note = (
            f"{span[1] - span[0] + 1:,} versions ({span[0]:,}..{span[1]:,}): keys over versions "
            f"and the heatmap show every {step}th version, the newest included; the other "
            f"charts show the largest of every {step} consecutive versions, so spikes stay "
            "visible."
        )
    charts = [
        Chart(
            figures.keys_over_versions(
                cells,
                partitions=store.history.get("partitions_by_version")
                or store.history.get("partitions"),
            ),
            "Is the state growing without bound? Keys in the store at each version, in all "
            "partitions and per partition.",
        ),
        Chart(
            figures.key_changes(changes),
            "What each batch did to the state: keys added, updated and removed.",
        ),
        Chart(
            figures.bytes_by_kind(files),
            "What each version wrote: bytes by file kind (purged files included).",
        ),
        Chart(
            figures.partition_heatmap(cells, "num_keys"),
            "Where the keys are: keys per partition and version.",
        ),
        Chart(
            figures.skew_over_time(skew),
            "Is one partition much bigger than the others? Largest partition over the median.",
        ),
        Chart(
            figures.snapshot_lag(store.lag),
            "How much a restart would replay: versions since the last snapshot and the bytes "
            "a cold load reads, per partition at its newest version.",
        ),
    ]
    if store.provider == "rocksdb":
        charts.append(
            Chart(
                figures.sst_upload_reuse(sst),
                "RocksDB: SST bytes each snapshot uploaded against those shared with the "
                "previous one.",
            )
        )
    charts += forensic_charts(store)
    return ChartGroup(anchor=store.anchor, title=store.label, charts=tuple(charts), note=note)


# ---- growth attribution and restart cost ---------------------------------------------------


def forensic_charts(store: StoreData) -> list[Chart]:
    """Growth attribution (when the state could be read) and restart cost, now and what-if."""
    f = store.forensics
    if f is None:
        return []
    out = []
    if f.growth is not None:
        out.append(
            Chart(
                figures.growth_contributors(f.growth),
                "Where do the new keys come from? Keys added at each version of the window "
                "carrying each top key-field value; grey: every key added.",
            )
        )
    out.append(
        Chart(
            figures.restart_cost(f.now_frame, f.alt_frame, f.alt_label),
            "How long would a restart take? Per partition at its newest version: bytes read "
            "(snapshot or zip with its SSTs, plus deltas or changelogs) and replays, now and "
            f"{f.alt_label} (Spark's snapshot rule applied to the same history).",
        )
    )
    return out


def chart_groups(data: ReportData) -> list[ChartGroup]:
    """Every section's charts, in report order: batches first, then each store."""
    return [query_charts(data), *(store_charts(s) for s in data.stores)]
