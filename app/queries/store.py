"""One state store over its versions and partitions: the State page's numbers and grids."""

from __future__ import annotations

from typing import Any

import pandas as pd

from stateglass.app.queries.connection import STORE_WHERE, read_frame


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
        SELECT partition_id, min(version) AS first, max(version) AS last
        FROM state_versions WHERE {STORE_WHERE} GROUP BY partition_id ORDER BY partition_id
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
    counts = read_frame(
        db,
        f"SELECT version, partitions FROM store_totals WHERE {STORE_WHERE} ORDER BY version",
        [checkpoint, operator_id, store_name],
    )
    moves = read_frame(
        db,
        "SELECT batch_id, partitions_before, partitions_after FROM repartitions "
        "WHERE checkpoint = ? ORDER BY batch_id",
        [checkpoint],
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
            if not moves.empty
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


def partition_cells(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Keys and bytes written per (partition, version) of one store: the State page's grids.

    Columns: partition_id, version, num_keys, bytes (delta or changelog plus snapshot or zip).
    A lean :func:`state_versions` for 200 partitions × 1,000 versions.
    """
    return read_frame(
        db,
        f"""
        SELECT partition_id, version, num_keys,
               coalesce(delta_bytes, 0) + coalesce(snapshot_bytes, 0) AS bytes
        FROM state_versions WHERE {STORE_WHERE}
        ORDER BY partition_id, version
        """,
        [checkpoint, operator_id, store_name],
    )


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
    """Bytes of state files per (version, kind), purged files included, all partitions.

    SST files have no version: they count at the version whose zip first referenced them
    (``sst_bytes_uploaded``). Columns: version, kind, bytes.
    """
    return read_frame(
        db,
        f"""
        SELECT version, kind, sum(size_bytes) AS bytes FROM state_files
        WHERE {STORE_WHERE} AND kind <> 'sst' AND version IS NOT NULL
        GROUP BY version, kind
        UNION ALL
        SELECT version, 'sst' AS kind, sum(sst_bytes_uploaded) AS bytes FROM state_versions
        WHERE {STORE_WHERE} AND sst_bytes_uploaded > 0
        GROUP BY version
        ORDER BY version, kind
        """,
        [checkpoint, operator_id, store_name] * 2,
    )


def disk_usage(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """State files on disk now, per kind. Columns: kind, files, bytes, purged_files."""
    return read_frame(
        db,
        f"""
        SELECT kind, count(*) FILTER (WHERE NOT purged) AS files,
               coalesce(sum(size_bytes) FILTER (WHERE NOT purged), 0) AS bytes,
               count(*) FILTER (WHERE purged) AS purged_files
        FROM state_files WHERE {STORE_WHERE} GROUP BY kind ORDER BY kind
        """,
        [checkpoint, operator_id, store_name],
    )


def partition_skew(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """The ``partition_skew`` view for one store: version, batch_id, max/median keys, skew."""
    return read_frame(
        db,
        f"SELECT version, batch_id, max_keys, median_keys, skew FROM partition_skew "
        f"WHERE {STORE_WHERE} ORDER BY version",
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
    """The ``state_growth`` view for one store: keys and key changes per version."""
    return read_frame(
        db,
        f"SELECT version, batch_id, num_keys, keys_added, keys_updated, keys_removed, "
        f"delta_bytes, keys_growth FROM state_growth WHERE {STORE_WHERE} ORDER BY version",
        [checkpoint, operator_id, store_name],
    )


def sst_reuse(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """RocksDB versions with a zip: SST bytes uploaded and reused, summed over partitions."""
    return read_frame(
        db,
        f"""
        SELECT version, version - 1 AS batch_id,
               sum(sst_bytes_uploaded) AS sst_bytes_uploaded,
               sum(sst_bytes_live - sst_bytes_uploaded) AS sst_bytes_reused,
               sum(sst_files_reused) AS sst_files_reused
        FROM state_versions WHERE {STORE_WHERE} AND sst_bytes_live IS NOT NULL
        GROUP BY version ORDER BY version
        """,
        [checkpoint, operator_id, store_name],
    )
