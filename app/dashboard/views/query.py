"""Query: the batch timeline of one checkpoint (durations, triggers, watermark, input)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from stateglass.app import figures, queries
from stateglass.app.dashboard import context
from stateglass.app.escape import md_code
from stateglass.parsers.units import fmt_ms


def _chart(fig: object, caption: str, key: str) -> None:
    st.plotly_chart(fig, width="stretch", key=key)
    st.caption(caption)


def render() -> None:
    st.title("Query")
    checkpoint = context.pick_checkpoint()
    if checkpoint is None:
        return
    # One read-only connection for every query of the page (opened only on a cache miss).
    with queries.session(context.db_path()):
        _query(checkpoint)


def _clock_note(copied: str) -> None:
    """Said once, above the numbers: which clock the page's times are on."""
    if copied:
        st.info(f"The {copied}: no batch duration is shown.", icon="🕒")


def _numbers(summary: dict[str, Any]) -> None:
    """The batch numbers first: how many, the last committed, pending, and the medians."""
    cols = st.columns(6)
    cols[0].metric("batches", f"{int(summary['batches']):,}")
    last = summary["last_committed"]
    cols[1].metric("last committed", "–" if last is None else f"{int(last)}")
    cols[2].metric(
        "pending",
        f"{int(summary['pending'])}",
        help="Offsets written, no commit: the batch is running, or the query stopped mid-batch.",
    )
    cols[3].metric(
        "median duration",
        fmt_ms(summary["median_duration_ms"]),
        help="Offsets written → commit written, by the files' modification times: the only "
        "clock that sees a batch end. Not shown where they look copied (they do not follow "
        "Spark's batchTimestampMs).",
    )
    cols[4].metric(
        "median trigger interval",
        fmt_ms(summary["median_interval_ms"]),
        help="Between consecutive batchTimestampMs in offsets/: Spark's own clock.",
    )
    cols[5].metric(
        "watermark delay (last)",
        fmt_ms(summary["last_delay_ms"]),
        help="Batch time minus the watermark the last batch ran with.",
    )


def _query(checkpoint: str) -> None:
    st.caption(md_code(checkpoint))
    with st.spinner("Reading batches…"):
        summary = context.load(queries.batch_summary, checkpoint)
        problems = context.load(queries.problems, checkpoint)
    if not summary["batches"]:
        st.info("No batches yet: the query has not written offsets/0.")
        return
    _clock_note(summary["file_times"].note)
    _numbers(summary)
    _repartition_notes(context.load(queries.repartitions, checkpoint))
    note = queries.downsample_note(int(summary["batches"])).replace("versions", "batches")
    _chart(
        context.figure(figures.batch_timeline, queries.batch_chart, checkpoint),
        "How long each batch took, from writing its offsets to writing its commit; red "
        "crosses are pending batches, a dotted line a repartition. Spikes point at slow "
        "state, skew or input bursts. "
        "Clock: the files' modification times (the only one that sees a batch end; not "
        "shown where they look copied)." + note,
        "batch_timeline",
    )
    left, right = st.columns(2)
    with left:
        _chart(
            context.figure(figures.trigger_intervals, queries.batch_chart, checkpoint),
            "Time between consecutive triggers. Above the configured trigger interval, batches "
            "take longer than the trigger and the query falls behind. Clock: each batch's "
            "trigger time (batchTimestampMs in offsets/), not file times." + note,
            "trigger_intervals",
        )
    with right:
        _chart(
            context.figure(figures.input_per_batch, queries.input_per_batch, checkpoint),
            "What each batch read, from its source offsets: Kafka records, files of a file "
            "source (counted in sources/), rows where Spark's progress events count them "
            "(numInputRows). A rate source without them shows seconds (rows = rowsPerSecond × "
            "seconds; the checkpoint does not keep rowsPerSecond). A source whose offset is a "
            "bare number and keeps no log in sources/ (socket, memory, …) shows the offset "
            "steps it advanced: its offsets do not say which source it is."
            + (f" The newest {queries.MAX_POINTS:,} batches." if note else ""),
            "input_per_batch",
        )
    _chart(
        context.figure(figures.watermark_delay, queries.batch_chart, checkpoint),
        "The event-time watermark each batch ran with, against its trigger time: the gap is "
        "how late data may arrive and still count, and how long state is kept. Clock: the "
        "trigger time and watermark Spark wrote in offsets/ (batchTimestampMs, "
        "batchWatermarkMs)." + note,
        "watermark_delay",
    )
    _progress(checkpoint)
    if not problems.empty:
        with st.expander(f"⚠️ {len(problems)} file(s) could not be read", expanded=True):
            st.dataframe(problems, hide_index=True)


# ---- what Spark reported: the query's progress events --------------------------------------------


def _progress(checkpoint: str) -> None:
    st.subheader("What Spark reported (progress events)")
    events = context.load(queries.progress, checkpoint)
    if events.empty:
        st.info(queries.NO_PROGRESS, icon="ℹ️")
        return
    with_input = events[events["num_input_rows"].fillna(0) > 0]
    behind = with_input[
        with_input["processed_rows_per_second"] < with_input["input_rows_per_second"]
    ]
    cols = st.columns(4)
    cols[0].metric("progress events", f"{len(events):,}")
    last = with_input.iloc[-1] if not with_input.empty else events.iloc[-1]
    cols[1].metric(
        "input rate (last)",
        f"{float(last['input_rows_per_second'] or 0):,.1f} rows/s",
        help=f"inputRowsPerSecond of batch {int(last['batch_id'])}, the newest with input.",
    )
    cols[2].metric(
        "fell behind",
        f"{len(behind)} of {len(with_input)} batches",
        help="Batches with input processed more slowly than it arrived "
        "(processedRowsPerSecond < inputRowsPerSecond).",
    )
    cols[3].metric("rows dropped as late", f"{int(events['rows_dropped_by_watermark'].sum()):,}")
    _chart(
        context.figure(figures.progress_rates, queries.progress, checkpoint),
        "Is the query keeping up? Spark's input rate (rows over the time since the previous "
        "trigger) against its processing rate (rows over the batch's duration). Red crosses: "
        "batches processed more slowly than their input arrived.",
        "progress_rates",
    )
    _chart(
        context.figure(
            figures.duration_breakdown, queries.progress, checkpoint, parts=queries.DURATION_PARTS
        ),
        "Where does a batch's time go? Spark's durationMs parts stacked per batch: "
        "latestOffset (asking the sources), getBatch, queryPlanning, addBatch (running the "
        "batch: state and sink), walCommit (offsets log), commitOffsets; other is the rest of "
        "triggerExecution.",
        "duration_breakdown",
    )
    _chart(
        context.figure(figures.watermark_and_late_rows, queries.progress, checkpoint),
        "The event-time watermark Spark reported after each batch, and the rows its stateful "
        "operators dropped because they arrived later than the watermark (lost results).",
        "watermark_late_rows",
    )


def _repartition_notes(batches: pd.DataFrame) -> None:
    """One line per repartition batch: Spark moved the state to another partition count."""
    for row in batches.itertuples(index=False):
        st.info(
            f"Batch {int(row.batch_id)} is a repartition: Spark moved the state from "
            f"{int(row.partitions_before)} to {int(row.shuffle_partitions)} partitions "
            "(spark._streamingCheckpointManager.repartition, Spark 4.2+); it read no input.",
            icon="🔀",
        )
