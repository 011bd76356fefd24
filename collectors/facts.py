"""Rows for the facts the health rules need beyond key counts: which SSTs each zip references,
Spark's temporary files, and the schema files' history. Pure: the scan gathers the inputs,
and writes the rows in its own transaction through :meth:`Database.upsert`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from stateglass.collectors.chains import ChainResult
from stateglass.collectors.listing import Listing
from stateglass.collectors.schemas import SchemaFile

if TYPE_CHECKING:
    import duckdb

    from stateglass.collectors.db import Database


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


def temp_file_rows(
    root: str, listing: Listing, first_seen: dict[str, datetime], now: datetime
) -> list[dict[str, Any]]:
    return [
        {
            "checkpoint": root,
            "path": path,
            "operator_id": f.operator_id,
            "store_name": f.store_name,
            "partition_id": f.partition_id,
            "size_bytes": f.stat.size,
            "modified_at": f.stat.mtime,
            "first_seen": first_seen.get(path, now),
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


def write_facts(
    db: Database,
    conn: duckdb.DuckDBPyConnection,
    root: str,
    listing: Listing,
    results: Iterable[ChainResult],
    schemas: Iterable[SchemaFile],
    now: datetime,
    last_batch: int | None,
) -> None:
    """Write this scan's facts inside the scan's write transaction."""
    db.upsert(conn, "sst_refs", sst_ref_rows(root, results), on_conflict="last_version")
    # Temp files are a snapshot of now: those renamed or deleted since the last scan go.
    first_seen = dict(
        conn.execute(
            "SELECT path, first_seen FROM temp_files WHERE checkpoint = ?", [root]
        ).fetchall()
    )
    db.delete_where(conn, "temp_files", {"checkpoint": root})
    db.upsert(conn, "temp_files", temp_file_rows(root, listing, first_seen, now))
    # A digest already known keeps its first_seen and first_batch: that is when it appeared.
    db.upsert(
        conn,
        "schema_files",
        schema_file_rows(root, schemas, now, last_batch),
        on_conflict="size_bytes,modified_at,last_seen",
    )
