"""The query's batches, and the input each batch took from each source.

The offsets say where each source stood (decoded by :mod:`stateglass.parsers.offsets`); a
file source's files are counted in its log (:mod:`stateglass.collectors.checkpoints.source_log`);
rate
sources count seconds, turned into rows where Spark's progress events say how many.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from stateglass.app.analysis.clock import FILE_TIMES_SQL, FileTimes, judge_file_times
from stateglass.app.queries.connection import REPARTITIONED, read_frame, read_rows
from stateglass.app.queries.downsample import MAX_POINTS, downsampled
from stateglass.app.queries.progress import progress_sources
from stateglass.parsers.offsets import (
    BARE_NUMBER,
    FILE_LOG,
    RATE_SECONDS,
    batch_positions,
    rate_source_rows,
)

_BATCHES = """
    SELECT b.batch_id, b.committed,
           CASE WHEN b.batch_timestamp_ms IS NOT NULL
                THEN epoch_ms(b.batch_timestamp_ms) END AS batch_time,
           CASE WHEN b.watermark_ms > 0 THEN epoch_ms(b.watermark_ms) END AS watermark,
           b.offsets_written_at, b.committed_at,
           d.duration_ms, t.interval_ms, w.delay_ms, b.source_offsets,
           b.shuffle_partitions, r.partitions_before
    FROM batches b
    LEFT JOIN repartitions r USING (checkpoint, batch_id)
    LEFT JOIN batch_durations d USING (checkpoint, batch_id)
    LEFT JOIN trigger_intervals t USING (checkpoint, batch_id)
    LEFT JOIN watermark_delays w USING (checkpoint, batch_id)
    WHERE b.checkpoint = ? {more}
"""


def file_times(db: str, checkpoint: str) -> FileTimes:
    """Whether the checkpoint's file times follow Spark's batch times
    (:mod:`stateglass.app.analysis.clock`): durations made of them are dropped when not."""
    return judge_file_times(
        [(ts, off, com) for ts, off, com in read_rows(db, FILE_TIMES_SQL, [checkpoint])]
    )


def _on_one_clock(db: str, checkpoint: str, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` without the durations (offsets → commit file times) of a copied checkpoint."""
    if "duration_ms" in frame and not file_times(db, checkpoint).trusted:
        frame["duration_ms"] = None
    return frame


def batches(db: str, checkpoint: str, newest: int | None = None) -> pd.DataFrame:
    """One row per batch of the checkpoint (the ``newest`` batches only, when given), with
    the metrics of the batch views.

    Columns: batch_id, committed, batch_time (trigger time), watermark (NULL without one),
    offsets_written_at, committed_at, duration_ms, interval_ms, delay_ms, source_offsets,
    shuffle_partitions, and partitions_before (the count before, for a repartition batch;
    NULL for any other). No duration_ms where the file times look copied.
    """
    if newest is None:
        frame = read_frame(db, _BATCHES.format(more="") + " ORDER BY b.batch_id", [checkpoint])
    else:
        frame = read_frame(
            db,
            _BATCHES.format(
                more="AND b.batch_id > (SELECT max(batch_id) FROM batches WHERE checkpoint = ?) - ?"
            )
            + " ORDER BY b.batch_id",
            [checkpoint, checkpoint, newest],
        )
    return _on_one_clock(db, checkpoint, frame)


# The chart columns of :func:`batches` (not the offsets, which only the input chart reads).
_CHART_COLUMNS = [
    "batch_time",
    "watermark",
    "offsets_written_at",
    "committed_at",
    "duration_ms",
    "interval_ms",
    "delay_ms",
]


def batch_chart(db: str, checkpoint: str) -> pd.DataFrame:
    """:func:`batches` for the Query page's charts: committed batches downsampled
    (:mod:`.downsample`), pending ones all, no offsets. Columns as :func:`batches` without
    ``source_offsets``; ``partitions_before`` and ``shuffle_partitions`` are set on repartition
    batches only."""
    source = _BATCHES.format(more="AND b.committed").replace(", b.source_offsets", "")
    done = read_frame(db, downsampled(source, _CHART_COLUMNS, x="batch_id"), [checkpoint])
    pending = read_frame(
        db,
        _BATCHES.format(more="AND NOT b.committed").replace(", b.source_offsets", "")
        + " ORDER BY b.batch_id",
        [checkpoint],
    )
    done.insert(1, "committed", True)
    out = pd.concat([done, pending[done.columns]]) if not pending.empty else done
    # Repartition batches are marked on the chart even where a bucket hides their bar.
    out = out.merge(repartitions(db, checkpoint), on="batch_id", how="outer")
    out["committed"] = out["committed"].astype("boolean").fillna(True).astype(bool)
    out = out.sort_values("batch_id", kind="stable").reset_index(drop=True)
    return _on_one_clock(db, checkpoint, out)


def repartitions(db: str, checkpoint: str) -> pd.DataFrame:
    """The checkpoint's repartition batches (Spark 4.2+). Columns: batch_id, partitions_before,
    shuffle_partitions (the count after)."""
    return read_frame(
        db,
        "SELECT batch_id, partitions_before, partitions_after AS shuffle_partitions "
        f"FROM repartitions WHERE checkpoint = ? AND {REPARTITIONED} ORDER BY batch_id",
        [checkpoint, checkpoint],
    )


def batch_summary(db: str, checkpoint: str) -> dict[str, Any]:
    """The Query page's headline numbers, aggregated in SQL: batches, last_committed, pending,
    median_duration_ms (None where the file times look copied), median_interval_ms,
    last_delay_ms (None where unknown), file_times (the :class:`FileTimes` verdict)."""
    row = read_frame(
        db,
        """
        SELECT (SELECT count(*) FROM batches WHERE checkpoint = ?) AS batches,
               (SELECT max(batch_id) FROM batches WHERE checkpoint = ? AND committed)
                   AS last_committed,
               (SELECT count(*) FROM batches WHERE checkpoint = ? AND NOT committed)
                   AS pending,
               (SELECT median(duration_ms) FROM batch_durations d
                 JOIN batches b USING (checkpoint, batch_id)
                 WHERE checkpoint = ? AND b.committed) AS median_duration_ms,
               (SELECT median(interval_ms) FROM trigger_intervals WHERE checkpoint = ?)
                   AS median_interval_ms,
               (SELECT arg_max(delay_ms, batch_id) FROM watermark_delays WHERE checkpoint = ?)
                   AS last_delay_ms
        """,
        [checkpoint] * 6,
    ).iloc[0]
    out: dict[str, Any] = {k: (None if pd.isna(v) else v) for k, v in row.items()}
    out["file_times"] = file_times(db, checkpoint)
    if not out["file_times"].trusted:
        out["median_duration_ms"] = None
    return out


def input_from_offsets(frame: pd.DataFrame, checkpoint: str | None = None) -> pd.DataFrame:
    """Input per batch and source from the ``source_offsets`` column of :func:`batches`.

    A batch's input is its offset minus the previous batch's. For a file source the files are
    counted in the checkpoint's ``sources/`` log when ``checkpoint`` is readable (else the
    batch is skipped). A bare-number offset is a rate source's seconds when the source keeps
    a log in ``sources/`` (the rate source does), else the steps it advanced, its source not
    guessed. Columns: batch_id, source, amount, unit.
    """
    rows: list[dict[str, Any]] = []
    previous: dict[str, float] = {}
    file_counts: dict[str, dict[int, int]] = {}
    units: dict[str, str] = {}
    for batch_id, raw in zip(frame["batch_id"], frame["source_offsets"], strict=True):
        for sid, value, unit in batch_positions(raw):
            before = previous.get(sid)
            previous[sid] = value
            if unit == BARE_NUMBER:
                unit = units.setdefault(sid, _bare_unit(checkpoint, sid))
            if unit != FILE_LOG:
                if before is not None:
                    rows.append(_input_row(batch_id, sid, value - before, unit))
                continue
            if checkpoint is None:
                continue
            # Read the source log once per source (setdefault would read it every batch).
            if sid not in file_counts:
                # Only a file source needs the checkpoint reader (and its store readers).
                from stateglass.collectors.checkpoints.source_log import files_per_log_batch

                file_counts[sid] = files_per_log_batch(checkpoint, sid)
            counts = file_counts[sid]
            start = -1 if before is None else int(before)
            files = sum(counts.get(b, 0) for b in range(start + 1, int(value) + 1))
            if counts:
                rows.append(_input_row(batch_id, sid, files, "files"))
    return pd.DataFrame(rows, columns=["batch_id", "source", "amount", "unit"])


def _bare_unit(checkpoint: str | None, source_id: str) -> str:
    """A bare-number offset's unit: the rate source's seconds when the source keeps a log
    (the rate source writes its start time there; socket and memory sources write none)."""
    if checkpoint is None:
        return BARE_NUMBER
    from stateglass.collectors.checkpoints.source_log import keeps_log

    return RATE_SECONDS if keeps_log(checkpoint, source_id) else BARE_NUMBER


# Units Spark's progress events can turn into rows (:func:`rate_rows`).
COUNTED_BY_PROGRESS = (RATE_SECONDS, BARE_NUMBER)


def _input_row(batch_id: Any, source_id: str, amount: float, unit: str) -> dict[str, Any]:
    return {
        "batch_id": int(batch_id),
        "source": f"source {source_id}",
        "amount": amount,
        "unit": unit,
    }


def input_per_batch(db: str, checkpoint: str) -> pd.DataFrame:
    """:func:`input_from_offsets` on the checkpoint's newest :data:`MAX_POINTS` batches (each
    batch's offsets are parsed, so a month is not); a lone rate source in rows
    where Spark's progress events give them (:func:`rate_rows`)."""
    frame = input_from_offsets(batches(db, checkpoint, newest=MAX_POINTS), checkpoint)
    if frame["unit"].isin(COUNTED_BY_PROGRESS).any():
        frame = rate_rows(frame, progress_sources(db, checkpoint))
    return frame


def _rate_source_rows(events: pd.DataFrame) -> dict[int, float]:
    """numInputRows of the one rate source in each event's ``sources`` list, by batch id."""
    out: dict[int, float] = {}
    if "sources" not in events:
        return out
    for batch_id, raw in zip(events["batch_id"], events["sources"], strict=True):
        rows = rate_source_rows(raw)
        if rows is not None:
            out[int(batch_id)] = rows  # a retried batch: the newest event wins
    return out


def rate_rows(inputs: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """The rate source's seconds, or a bare-number offset's steps, as rows, from each batch's
    ``numInputRows``.

    The offsets count seconds; rows are rowsPerSecond × seconds, and the checkpoint does not
    keep rowsPerSecond. Progress events count rows per source (``sources``: taken when the
    query has one rate source, matched by its description) and for all sources together
    (``num_input_rows``: taken when the query has one source, whatever it is); only for the
    batches they cover.
    """
    if events.empty:
        return inputs
    rate_ids = inputs.loc[inputs["unit"] == RATE_SECONDS, "source"].unique()
    by_batch = _rate_source_rows(events) if len(rate_ids) == 1 else {}
    if not by_batch:
        if inputs["source"].nunique() != 1:
            return inputs
        rows = events.dropna(subset=["num_input_rows"]).drop_duplicates("batch_id", keep="last")
        by_batch = dict(zip(rows["batch_id"].astype(int), rows["num_input_rows"], strict=True))
    out = inputs.copy()
    known = out["unit"].isin(COUNTED_BY_PROGRESS) & out["batch_id"].isin(by_batch)
    out.loc[known, "amount"] = out.loc[known, "batch_id"].map(by_batch).astype(float)
    out.loc[known, "unit"] = "rows"
    return out
