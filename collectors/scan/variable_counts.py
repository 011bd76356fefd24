"""The ``variable_rows`` of a scan: rows per transformWithState state variable, counted at the
newest version of each partition the scan's chains read.

The chains count raw keys, from key sets alone; rows as Spark's reader returns them need the
values too (a ListState is one row per element), so they are counted once per partition and
scan, at its newest version, not at every version a chain walks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stateglass.collectors.checkpoints.checkpoint import StoreInfo
from stateglass.collectors.checkpoints.variable_rows import count_variables
from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.fs import FileSystem
from stateglass.collectors.scan.chains import ChainResult


def variable_rows(
    root: str,
    stores: Iterable[StoreInfo],
    results: Iterable[ChainResult],
    fs: FileSystem,
    on_error: Callable[[CheckpointError], None],
) -> list[dict[str, Any]]:
    """Rows of each column family of the transformWithState stores at the newest version of
    each chain counted; a partition that cannot be read goes to ``on_error`` and is skipped."""
    tws = {
        (s.operator_id, s.store_name): s
        for s in stores
        if s.is_transform_with_state and s.state_variables
    }
    out: list[dict[str, Any]] = []
    for result in results:
        task = result.task
        store = tws.get((task.operator_id, task.store_name))
        if store is None or not result.versions:
            continue
        version = result.versions[-1].version
        try:
            reader = task.open_reader(fs)
            counts = count_variables(reader, version, store, task.row_checksum, task.store_dir)
        except CheckpointError as exc:
            on_error(exc)
            continue
        out.extend(
            {
                "checkpoint": root,
                "operator_id": task.operator_id,
                "store_name": task.store_name,
                "partition_id": task.partition_id,
                "version": version,
                "column_family": c.name,
                "role": c.role,
                "kind": c.kind,
                "row_count": c.rows,
                "raw_keys": c.raw_keys,
            }
            for c in counts
        )
    return out
