"""One state store over its versions and partitions: the State page's numbers and grids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from stateglass.app.queries.connection import REPARTITIONED, STORE_WHERE, read_frame
from stateglass.app.queries.downsample import downsampled


def store_history(db: str, checkpoint: str, operator_id: int, store_name: str) -> dict[str, Any]:
    """Where one store's collected history starts, and why; ``{}`` without any version.

    Keys: ``first`` / ``last`` (any partition), ``first_complete`` / ``last_complete``
    (every partition known, the range totals are drawn over; ``None`` if no such version),
    ``partitions`` (expected at the newest version), ``earliest`` (partition -> its first
    collected version), ``repartitions`` ((batch, before, after) of each) and
    ``partitions_by_version`` (``(version, count)`` pairs when a repartition changed the
    count, else None).
    """
    rows = read_frame(
        db,
        f"""
        SELECT partition_id, first_version AS first, version AS last
        FROM partition_newest WHERE {STORE_WHERE} ORDER BY partition_id
        """,
        [checkpoint, operator_id, store_name],
    )
    if rows.empty:
        return {}
    span = read_frame(
        db,
        f"""
        SELECT min(version) FILTER (WHERE complete) AS first_complete,
               max(version) FILTER (WHERE complete) AS last_complete,
               arg_max(partitions, version) AS partitions
        FROM store_totals WHERE {STORE_WHERE}
        """,
        [checkpoint, operator_id, store_name],
    ).iloc[0]
    moves = read_frame(
        db,
        "SELECT batch_id, partitions_before, partitions_after FROM repartitions "
        f"WHERE checkpoint = ? AND {REPARTITIONED} ORDER BY batch_id",
        [checkpoint, checkpoint],
    )
    # The count per version matters only where a repartition changed it: a month is 259,200
    # versions to read for nothing otherwise.
    counts = (
        read_frame(
            db,
            f"SELECT version, partitions FROM store_totals WHERE {STORE_WHERE} ORDER BY version",
            [checkpoint, operator_id, store_name],
        )
        if not moves.empty
        else None
    )

    def _int(value: Any) -> int | None:
        return None if pd.isna(value) else int(value)

    return {
        "first": int(rows["first"].min()),
        "last": int(rows["last"].max()),
        "first_complete": _int(span["first_complete"]),
        "last_complete": _int(span["last_complete"]),
        "partitions": _int(span["partitions"]),
        "earliest": dict(
            zip(rows["partition_id"].astype(int), rows["first"].astype(int), strict=True)
        ),
        "repartitions": [tuple(int(x) for x in r) for r in moves.itertuples(index=False)],
        # Per version where a repartition changed the count (see figures.complete_total).
        "partitions_by_version": (
            tuple((int(v), int(n)) for v, n in counts.itertuples(index=False))
            if counts is not None
            else None
        ),
    }


def repartition_note(history: dict[str, Any]) -> str:
    """``partitions 3 → 5 at batch 3 (repartition)``, one per repartition; "" without any."""
    return "; ".join(
        f"partitions {before} → {after} at batch {batch} (repartition)"
        for batch, before, after in history.get("repartitions", ())
    )


def history_note(history: dict[str, Any]) -> str:
    """One line saying where a store's history starts and why (plain text, no markup).

    Version 1 is the first a query writes, so a later start means Spark had purged the
    earlier files before StateGlass first collected them.
    """
    if not history:
        return "no state versions collected yet"
    first_complete = history["first_complete"]
    if first_complete is None:
        return (
            f"no version has every one of the {history['partitions']} partitions collected "
            f"(versions {history['first']}..{history['last']}), so no total over partitions "
            "is drawn"
        )
    if first_complete <= 1:
        text = f"history from version 1 (the query's first batch) to {history['last_complete']}"
    else:
        text = (
            f"history from version {first_complete}: earlier versions were purged by Spark "
            "before the first collect"
        )
    moved = repartition_note(history)
    if moved:
        text += f"; {moved}"
    ahead = {p: v for p, v in history["earliest"].items() if v < first_complete}
    if ahead:
        parts = ", ".join(f"partition {p} from {v}" for p, v in sorted(ahead.items())[:4])
        more = "" if len(ahead) <= 4 else f" and {len(ahead) - 4} more"
        verb = "reaches" if len(ahead) == 1 else "reach"
        text += (
            f"; {parts}{more} {verb} further back, but totals over partitions start at "
            f"{first_complete}, the first version where all {history['partitions']} are known"
        )
    return text


# Versions across the State page's heatmap at most: 200 partitions × 250 columns.
HEATMAP_COLUMNS = 250


@dataclass(frozen=True)
class CellGrid:
    """The columns of :func:`partition_cells`: versions ``lo``..``hi`` cut into columns of
    ``width`` versions from ``anchor`` on. A grid this coarse is aligned to the store's bucket
    rows (``partition_buckets``, ``bucket`` versions each), so each of them falls in one column
    whole; ``buckets`` is the range of bucket numbers read from them (empty: none)."""

    lo: int
    hi: int
    anchor: int
    width: int
    bucket: int | None
    buckets: tuple[int, int]

    def partition_ranges(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The two version ranges still read from the partition rows: before and after the
        bucket rows read (an empty range has its end before its start)."""
        first, last = self.buckets
        if self.bucket is None or first > last:
            return (self.lo, self.hi), (1, 0)
        return (self.lo, first * self.bucket), ((last + 1) * self.bucket + 1, self.hi)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def cell_grid(
    db: str,
    checkpoint: str,
    operator_id: int,
    store_name: str,
    first: int | None = None,
    last: int | None = None,
    columns: int = HEATMAP_COLUMNS,
    bucket_rows: bool = True,
) -> CellGrid:
    """The grid :func:`partition_cells` draws versions ``first``..``last`` on (see there)."""
    row = read_frame(
        db,
        f"""
        SELECT (SELECT coalesce(?, min(first_version)) FROM partition_newest
                WHERE {STORE_WHERE}) AS lo,
               (SELECT coalesce(?, max(version)) FROM partition_newest
                WHERE {STORE_WHERE}) AS hi,
               (SELECT max(width) FROM bucket_marks WHERE {STORE_WHERE}) AS bucket,
               (SELECT max(through_version) FROM bucket_marks WHERE {STORE_WHERE}) AS through
        """,
        [first, checkpoint, operator_id, store_name, last]
        + [checkpoint, operator_id, store_name] * 3,
    ).iloc[0]
    if pd.isna(row["lo"]) or pd.isna(row["hi"]):
        return CellGrid(1, 0, 1, 1, None, (1, 0))
    lo, hi = int(row["lo"]), int(row["hi"])
    width = max(1, _ceil_div(hi - lo + 1, columns))
    n = None if pd.isna(row["bucket"]) else int(row["bucket"])
    if n is None or width < n:
        return CellGrid(lo, hi, lo, width, None, (1, 0))
    # Columns start at a bucket's first version and span whole buckets.
    anchor = (lo - 1) // n * n + 1
    width = _ceil_div(_ceil_div(hi - anchor + 1, columns), n) * n
    # Bucket rows whose versions all lie in lo..hi and are counted there (through the mark).
    through = min(hi, int(row["through"]))
    buckets = (_ceil_div(lo - 1, n), through // n - 1) if bucket_rows else (1, 0)
    return CellGrid(lo, hi, anchor, width, n, buckets)


def partition_cells(
    db: str,
    checkpoint: str,
    operator_id: int,
    store_name: str,
    first: int | None = None,
    last: int | None = None,
    columns: int = HEATMAP_COLUMNS,
    bucket_rows: bool = True,
) -> pd.DataFrame:
    """Keys and bytes written per (partition, column of versions) of one store, between
    versions ``first`` and ``last`` (the whole history by default): the State page's grids.

    At most ``columns`` columns of equal width (:func:`cell_grid`); a zoom narrow enough gets
    one version a column (full resolution where the partition rows are kept: see
    ``collectors/db/history_settings.py``; older rows are roll-ups, whose own buckets are the finest
    there is). Columns wider than a bucket of ``partition_buckets`` are made of whole buckets,
    read from those rows rather than from the partition rows, so a page costs the same
    whatever the full-resolution window holds; ``bucket_rows=False`` counts the same grid
    from the partition rows alone (what the bucket rows must equal). Columns: partition_id,
    version (the column's last version, shared by every partition), num_keys (the last count
    in the column), min_keys and max_keys (its extremes), bytes (written in it: delta or
    changelog plus snapshot or zip).
    """
    grid = cell_grid(db, checkpoint, operator_id, store_name, first, last, columns, bucket_rows)
    before, after = grid.partition_ranges()
    store = [checkpoint, operator_id, store_name]
    partition_rows = f"""
        SELECT partition_id, version AS last_version, num_keys AS last_keys,
               num_keys AS min_keys, num_keys AS max_keys,
               coalesce(delta_bytes, 0) + coalesce(snapshot_bytes, 0) AS bytes
        FROM state_versions WHERE {STORE_WHERE} AND version BETWEEN ? AND ?
    """
    return read_frame(
        db,
        f"""
        WITH rows AS (
            {partition_rows}
            UNION ALL
            {partition_rows}
            UNION ALL
            SELECT partition_id, last_version, last_keys, min_keys, max_keys, bytes
            FROM partition_buckets WHERE {STORE_WHERE} AND bucket BETWEEN ? AND ?
            UNION ALL
            SELECT partition_id, last_version, last_keys, min_keys, max_keys,
                   coalesce(delta_bytes, 0) + coalesce(snapshot_bytes, 0) AS bytes
            FROM state_rollups WHERE {STORE_WHERE} AND last_version BETWEEN ? AND ?
        )
        SELECT partition_id,
               least({grid.hi}, {grid.anchor}
                     + ((last_version - {grid.anchor}) // {grid.width} + 1) * {grid.width} - 1)
                   AS version,
               arg_max_null(last_keys, last_version) AS num_keys,
               min(min_keys) AS min_keys, max(max_keys) AS max_keys, sum(bytes) AS bytes
        FROM rows GROUP BY ALL ORDER BY partition_id, version
        """,
        [*store, *before, *store, *after, *store, *grid.buckets, *store, grid.lo, grid.hi],
    )


def version_span(db: str, checkpoint: str, operator_id: int, store_name: str) -> tuple[int, int]:
    """The first and newest version collected of any partition of one store ((0, 0): none)."""
    row = read_frame(
        db,
        f"SELECT min(first_version) AS lo, max(version) AS hi FROM partition_newest "
        f"WHERE {STORE_WHERE}",
        [checkpoint, operator_id, store_name],
    ).iloc[0]
    return (0, 0) if pd.isna(row["lo"]) else (int(row["lo"]), int(row["hi"]))


def state_versions(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Every (partition, version) row of one store, plus ``batch_id`` and ``bytes``.

    ``bytes`` is what the version wrote: its delta or changelog plus its snapshot or zip.
    """
    return read_frame(
        db,
        f"""
        SELECT partition_id, version, version - 1 AS batch_id, num_keys,
               keys_added, keys_updated, keys_removed, delta_bytes, snapshot_bytes,
               coalesce(delta_bytes, 0) + coalesce(snapshot_bytes, 0) AS bytes,
               sst_bytes_live, sst_bytes_uploaded, sst_files_reused,
               versions_since_snapshot, replay_bytes
        FROM state_versions WHERE {STORE_WHERE}
        ORDER BY partition_id, version
        """,
        [checkpoint, operator_id, store_name],
    )


def bytes_by_kind(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Bytes of state files per (version, kind), purged files included, all partitions;
    downsampled per kind (:mod:`.downsample`).

    SST files have no version: they count at the version whose zip first referenced them
    (``sst_bytes_uploaded``). Purged files compacted by ``maintain`` count from their
    per-version sums. Columns: version, kind, bytes.
    """
    source = f"""
        SELECT version, kind, sum(bytes) AS bytes FROM (
            SELECT version, kind, size_bytes AS bytes FROM state_files
            WHERE {STORE_WHERE} AND kind <> 'sst' AND version IS NOT NULL
            UNION ALL
            SELECT version, kind, bytes FROM file_summaries
            WHERE {STORE_WHERE} AND kind <> 'sst'
            UNION ALL
            SELECT version, 'sst' AS kind, sst_bytes_uploaded AS bytes FROM store_versions
            WHERE {STORE_WHERE} AND sst_bytes_uploaded > 0
        ) GROUP BY version, kind
    """
    return read_frame(
        db,
        downsampled(source, ["bytes"], series="kind"),
        [checkpoint, operator_id, store_name] * 3,
    )


def disk_usage(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """State files on disk now, per kind. Columns: kind, files, bytes, purged_files."""
    return read_frame(
        db,
        f"""
        SELECT kind, sum(files) AS files, sum(bytes) AS bytes,
               sum(purged_files) AS purged_files FROM (
            SELECT kind, count(*) FILTER (WHERE NOT purged) AS files,
                   coalesce(sum(size_bytes) FILTER (WHERE NOT purged), 0) AS bytes,
                   count(*) FILTER (WHERE purged) AS purged_files
            FROM state_files WHERE {STORE_WHERE} GROUP BY kind
            UNION ALL
            SELECT kind, 0, 0, sum(files) FROM file_summaries WHERE {STORE_WHERE} GROUP BY kind
        ) GROUP BY kind ORDER BY kind
        """,
        [checkpoint, operator_id, store_name] * 2,
    )


def partition_skew(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """The ``partition_skew`` view for one store: version, batch_id, max/median keys, skew;
    downsampled (:mod:`.downsample`)."""
    return read_frame(
        db,
        downsampled(
            f"SELECT version, batch_id, max_keys, median_keys, skew FROM partition_skew "
            f"WHERE {STORE_WHERE}",
            ["batch_id", "max_keys", "median_keys", "skew"],
        ),
        [checkpoint, operator_id, store_name],
    )


def snapshot_lag(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """The ``snapshot_lag`` view for one store: per partition at its newest version."""
    return read_frame(
        db,
        f"SELECT partition_id, latest_version, versions_since_snapshot, replay_bytes "
        f"FROM snapshot_lag WHERE {STORE_WHERE} ORDER BY partition_id",
        [checkpoint, operator_id, store_name],
    )


def state_growth(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """The ``state_growth`` view for one store: keys and key changes per version;
    downsampled (:mod:`.downsample`)."""
    columns = [
        "batch_id",
        "num_keys",
        "keys_added",
        "keys_updated",
        "keys_removed",
        "delta_bytes",
        "keys_growth",
    ]
    # The ``state_growth`` view's rows, with its growth column computed after the store's
    # filter: the view's window would partition every store's versions by three columns first
    # (at a month, most of the page's slowest query).
    source = (
        f"SELECT version, {', '.join(columns[:-1])}, num_keys - lag(num_keys) OVER "
        f"(ORDER BY version) AS keys_growth FROM store_totals WHERE {STORE_WHERE}"
    )
    return read_frame(db, downsampled(source, columns), [checkpoint, operator_id, store_name])


def sst_reuse(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """RocksDB versions with a zip: SST bytes uploaded and reused, summed over partitions;
    downsampled (:mod:`.downsample`)."""
    columns = ["batch_id", "sst_bytes_uploaded", "sst_bytes_reused", "sst_files_reused"]
    return read_frame(
        db,
        downsampled(
            f"""
            SELECT version, version - 1 AS batch_id, sst_bytes_uploaded, sst_bytes_reused,
                   sst_files_reused
            FROM store_versions WHERE {STORE_WHERE} AND sst_versions > 0
            """,
            columns,
        ),
        [checkpoint, operator_id, store_name],
    )


def history_kept(db: str, checkpoint: str) -> str:
    """One line saying what the database keeps of the checkpoint, at what resolution (plain
    text): what the last ``maintain`` did (``collectors/db/history_settings.py``)."""
    rows = read_frame(
        db,
        "SELECT full_from_version, full_days, rollup_versions, maintained_at "
        "FROM history_maintenance WHERE checkpoint = ?",
        [checkpoint],
    )
    if rows.empty:
        return (
            "Kept: every version at full resolution so far; older history is rolled up once "
            "it leaves the full-resolution window (the [history] settings, stateglass maintain)."
        )
    row = rows.iloc[0]
    days = f"{float(row['full_days']):g}"
    if pd.isna(row["full_from_version"]):
        return (
            f"Kept: every version at full resolution (all within the newest {days} days or "
            "still on disk); totals over partitions at every version, for good."
        )
    return (
        f"Kept: partition rows at full resolution from version {int(row['full_from_version'])} "
        f"(the newest {days} days); before it one min/max/last row per partition and "
        f"{int(row['rollup_versions'])} versions; totals over partitions at every version, "
        "for good."
    )


def keys_at_version(
    db: str,
    checkpoint: str,
    operator_id: int,
    store_name: str,
    version: int,
    partitions: list[int],
) -> int | None:
    """The keys ``partitions`` held at ``version`` as the collector counted them, or None
    unless every one of them was counted at that version (not collected yet, or rolled up).

    Example: ``keys_at_version(db, "/data/cp", 0, "default", 123, list(range(200)))``.
    """
    if not partitions:
        return None
    row = read_frame(
        db,
        f"""
        SELECT count(num_keys) AS counted, sum(num_keys) AS num_keys FROM state_versions
        WHERE {STORE_WHERE} AND version = ? AND list_contains(?, partition_id)
        """,
        [checkpoint, operator_id, store_name, version, partitions],
    ).iloc[0]
    if int(row["counted"]) != len(set(partitions)):
        return None
    return int(row["num_keys"])
