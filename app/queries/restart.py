"""What the restart-cost model reads: the state files on disk and each version's sizes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from stateglass.app.analysis.chain_files import chain_files
from stateglass.app.queries.connection import NOW_PARTITIONS, STORE_WHERE, read_frame, read_rows
from stateglass.collectors.stores import FULL_KINDS


def live_state_files(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """State files on disk now (not purged) of the partitions a restart loads.
    Columns: partition_id, version, kind, size_bytes, and ``unreadable``: a snapshot or zip
    Spark cannot open (the problems the scan recorded, the SSTs a zip lacks), which its
    automatic snapshot repair skips for an older one."""
    store = [checkpoint, operator_id, store_name]
    frame = read_frame(
        db,
        f"""
        SELECT partition_id, version, kind, size_bytes FROM state_files
        WHERE {STORE_WHERE} AND NOT purged AND {NOW_PARTITIONS}
        ORDER BY partition_id, version, kind
        """,
        [*store, checkpoint, *store],
    )
    chains = chain_files(_History(db, checkpoint))
    bad = {
        (part, version)
        for (op, name, part), files in chains.items()
        if (op, name) == (operator_id, store_name)
        for version in files.unopenable()
    }
    frame["unreadable"] = [
        kind in FULL_KINDS and (int(part), int(version)) in bad
        for part, version, kind in zip(
            frame["partition_id"], frame["version"].fillna(-1), frame["kind"], strict=True
        )
    ]
    return frame


@dataclass(frozen=True)
class _History:
    """One checkpoint's history rows, as the health rules read them."""

    db: str
    checkpoint: str

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return read_rows(self.db, sql, [self.checkpoint, *params])


# Versions per partition the restart model reads, back from each partition's newest: a cold
# load replays from the last snapshot, and Spark snapshots every 10 versions by default (a
# what-if with a longer period than this reads as far back as the window).
RESTART_WINDOW = 300


def restart_facts(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Per (partition, version) of each partition's newest :data:`RESTART_WINDOW` versions,
    among the partitions a restart loads: the sizes and key counts the restart-cost model reads
    (found through ``partition_newest``, not by reading a whole history)."""
    store = [checkpoint, operator_id, store_name]
    return read_frame(
        db,
        f"""
        SELECT v.partition_id, v.version, v.num_keys, v.keys_added, v.keys_updated,
               v.keys_removed, v.delta_bytes, v.snapshot_bytes, v.sst_bytes_live,
               v.sst_files_live
        FROM state_versions v
        JOIN partition_newest n USING (checkpoint, operator_id, store_name, partition_id)
        WHERE v.checkpoint = ? AND v.operator_id = ? AND v.store_name = ?
          AND v.version > n.version - {RESTART_WINDOW}
          AND v.version >= (SELECT min(version) - {RESTART_WINDOW} FROM partition_newest
                            WHERE {STORE_WHERE})
          AND {NOW_PARTITIONS}
        ORDER BY v.partition_id, v.version
        """,
        [*store, *store, checkpoint, *store],
    )
