"""What the restart-cost model reads: the state files on disk and each version's sizes."""

from __future__ import annotations

import pandas as pd

from stateglass.app.queries.connection import NOW_PARTITIONS, STORE_WHERE, read_frame


def live_state_files(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """State files on disk now (not purged) of the partitions a restart loads.
    Columns: partition_id, version, kind, size_bytes."""
    store = [checkpoint, operator_id, store_name]
    return read_frame(
        db,
        f"""
        SELECT partition_id, version, kind, size_bytes FROM state_files
        WHERE {STORE_WHERE} AND NOT purged AND {NOW_PARTITIONS}
        ORDER BY partition_id, version, kind
        """,
        [*store, checkpoint, *store],
    )


def restart_facts(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Per (partition, version) of the partitions a restart loads: the sizes and key counts
    the restart-cost model reads."""
    store = [checkpoint, operator_id, store_name]
    return read_frame(
        db,
        f"""
        SELECT partition_id, version, num_keys, keys_added, keys_updated, keys_removed,
               delta_bytes, snapshot_bytes, sst_bytes_live, sst_files_live
        FROM state_versions WHERE {STORE_WHERE} AND {NOW_PARTITIONS}
        ORDER BY partition_id, version
        """,
        [*store, checkpoint, *store],
    )
