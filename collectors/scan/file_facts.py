"""Rows for the facts the health rules need beyond key counts: which SSTs each zip references,
Spark's temporary files, and the schema files' history. Pure: the scan gathers the inputs and
hands the rows to :meth:`Database.record_scan` in its :class:`~collectors.db.writes.ScanWrite`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from stateglass.collectors.checkpoints.listing import Listing
from stateglass.collectors.scan.chains import ChainResult
from stateglass.collectors.scan.schema_history import SchemaFile


def sst_ref_rows(root: str, results: Iterable[ChainResult]) -> list[dict[str, Any]]:
    """One row per (partition, SST) with the oldest and newest zip version of this scan using it."""
    refs: dict[tuple[int, str, int, str], list[int]] = {}
    for result in results:
        op, store, part = result.task.chain
        for c in result.versions:
            for name in c.sst_files or ():
                span = refs.setdefault((op, store, part, name), [c.version, c.version])
                span[0] = min(span[0], c.version)
                span[1] = max(span[1], c.version)
    return [
        {
            "checkpoint": root,
            "operator_id": op,
            "store_name": store,
            "partition_id": part,
            "sst_file": name,
            "first_version": first,
            "last_version": last,
        }
        for (op, store, part, name), (first, last) in sorted(refs.items())
    ]


def temp_file_rows(root: str, listing: Listing, now: datetime) -> list[dict[str, Any]]:
    """Spark's temporary files as listed now (a path already known keeps its first_seen)."""
    return [
        {
            "checkpoint": root,
            "path": path,
            "operator_id": f.operator_id,
            "store_name": f.store_name,
            "partition_id": f.partition_id,
            "size_bytes": f.stat.size,
            "modified_at": f.stat.mtime,
            "first_seen": now,
        }
        for path, f in sorted(listing.temp_files.items())
    ]


def schema_file_rows(
    root: str, files: Iterable[SchemaFile], now: datetime, last_batch: int | None
) -> list[dict[str, Any]]:
    return [
        {
            "checkpoint": root,
            "operator_id": f.operator_id,
            "store_name": f.store_name,
            "path": f.path,
            "sha256": f.sha256,
            "format_version": f.format_version,
            "key_schema": f.key_schema,
            "value_schema": f.value_schema,
            "size_bytes": f.size,
            "modified_at": f.mtime,
            "first_seen": now,
            "last_seen": now,
            "first_batch": last_batch,
        }
        for f in files
    ]


def last_committed(listing: Listing, commits_dir: str) -> int | None:
    """The newest ``commits/N`` in the listing (no extra I/O)."""
    ids = [
        int(p.rsplit("/", 1)[-1])
        for p in listing.log_files
        if p.startswith(commits_dir) and p.rsplit("/", 1)[-1].isdigit()
    ]
    return max(ids, default=None)
