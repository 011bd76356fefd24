"""The pure middle of a scan: which chains to read, and the rows the one writer records.

:func:`plan` decides the work from what the checkpoint holds now (its listing) beside what
earlier scans counted; the ``*_rows`` functions turn what the scan read into the rows of a
:class:`~collectors.db.writes.ScanWrite`. Nothing here reads a file or the database, so tests
can feed it any listing.

Example::

    tasks = plan(stores, listing, touched, known.versions, settings, cp.store_dir)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from stateglass.collectors.checkpoints.checkpoint import StoreInfo
from stateglass.collectors.checkpoints.listing import FileStat, Listing, version_file_stats
from stateglass.collectors.db.writes import Chain
from stateglass.collectors.scan.chains import ChainResult, ChainTask
from stateglass.parsers.logs import CommitMetadata, OffsetSeq


@dataclass(frozen=True)
class ChainSettings:
    """What every chain of one checkpoint decodes with, pinned in its offsets and commits."""

    root: str
    codec: str = "lz4"
    row_checksum: bool = False
    merge_delimiter: bytes = b","
    # batch -> commit, for checkpoint format v2's unique ids (empty when not needed)
    commits: Mapping[int, CommitMetadata] = field(default_factory=dict)


def mtime_timestamp(mtime: float) -> datetime:
    """File mtimes are stored as naive UTC timestamps."""
    return datetime.fromtimestamp(mtime, tz=UTC).replace(tzinfo=None)


def _chain_starts(
    listing: Listing, touched: frozenset[str], counted: Mapping[Chain, set[int]]
) -> dict[Chain, int]:
    """Per chain, the first version to read: its oldest new or changed file, or its oldest
    version not counted yet. Chains with neither are left out: nothing to read."""
    dirty: dict[Chain, int] = {}
    for path in touched:
        f = listing.state_files.get(path)
        if f is not None and f.version is not None:
            dirty[f.chain] = min(dirty.get(f.chain, f.version), f.version)
    starts: dict[Chain, int] = {}
    for chain, found in listing.chains().versions.items():
        uncounted = found - counted.get(chain, set())
        first = [v for v in (dirty.get(chain), min(uncounted, default=None)) if v is not None]
        if first:
            starts[chain] = min(first)
    return starts


def unique_ids(
    commits: Mapping[int, CommitMetadata], store: StoreInfo, partition: int
) -> tuple[tuple[int, str], ...]:
    """Checkpoint format v2: committed unique id of each version of this store partition."""
    from stateglass.collectors.checkpoints.state_reader import (
        _store_index,
    )  # the join stores' order, kept in one place

    index = _store_index(store)
    out = []
    for batch, commit in sorted(commits.items()):
        ids = (commit.state_unique_ids or {}).get(store.operator_id)
        if ids is None or partition >= len(ids) or index >= len(ids[partition]):
            continue
        out.append((batch + 1, ids[partition][index]))
    return tuple(out)


def plan(
    stores: Iterable[StoreInfo],
    listing: Listing,
    touched: frozenset[str],
    counted: Mapping[Chain, set[int]],
    settings: ChainSettings,
    store_dir: Callable[[int, int, str], str],
    seed_of: Callable[[Chain], tuple[int, set[bytes]] | None] | None = None,
) -> list[ChainTask]:
    """The chains a scan reads, in store and partition order: those with a new or changed
    file (``touched``) or a version not ``counted`` yet, each from its first such version.

    ``seed_of``: a watcher's carried key set of a chain (``ChainTask.seed``); given, every
    task also asks for its last key set back."""
    starts = _chain_starts(listing, touched, counted)
    tasks = []
    for store in stores:
        for partition in store.partitions:
            chain = (store.operator_id, store.store_name, partition)
            start = starts.get(chain)
            if start is None:
                continue
            directory = store_dir(store.operator_id, partition, store.store_name)
            tasks.append(
                ChainTask(
                    checkpoint=settings.root,
                    operator_id=store.operator_id,
                    store_name=store.store_name,
                    partition_id=partition,
                    store_dir=directory,
                    files=listing.store_dirs.get(directory),
                    provider=store.provider,
                    codec=settings.codec,
                    row_checksum=settings.row_checksum,
                    merge_delimiter=settings.merge_delimiter,
                    unique_ids=unique_ids(settings.commits, store, partition),
                    from_version=start,
                    trust_zip_num_keys=not store.uses_column_families,
                    seed=seed_of(chain) if seed_of is not None else None,
                    keep_tail=seed_of is not None,
                )
            )
    return tasks


# -- rows of the write ----------------------------------------------------------------------


def offsets_row(checkpoint: str, batch: int, stat: FileStat, seq: OffsetSeq) -> dict[str, Any]:
    """The ``batches`` columns an ``offsets/N`` file knows."""
    formats = {k: v for k, v in sorted(seq.conf.items()) if "formatversion" in k.lower()}
    return {
        "checkpoint": checkpoint,
        "batch_id": batch,
        "batch_timestamp_ms": seq.batch_timestamp_ms,
        "watermark_ms": seq.batch_watermark_ms,
        "offsets_written_at": mtime_timestamp(stat.mtime),
        "committed": False,
        "source_offsets": json.dumps(
            [{"source_id": s.source_id, "offset": s.offset_json} for s in seq.sources]
        ),
        "provider": seq.provider,
        "codec": seq.codec,
        "shuffle_partitions": seq.shuffle_partitions,
        "state_format_versions": json.dumps(formats),
    }


def commit_row(
    checkpoint: str, batch: int, stat: FileStat, commit: CommitMetadata
) -> dict[str, Any]:
    """The ``batches`` columns a ``commits/N`` file knows."""
    return {
        "checkpoint": checkpoint,
        "batch_id": batch,
        "committed": True,
        "committed_at": mtime_timestamp(stat.mtime),
        "next_watermark_ms": commit.next_batch_watermark_ms,
    }


def operator_rows(checkpoint: str, stores: Iterable[StoreInfo]) -> list[dict[str, Any]]:
    return [
        {
            "checkpoint": checkpoint,
            "operator_id": s.operator_id,
            "operator_name": s.operator_name,
            "store_name": s.store_name,
            "num_partitions": s.num_partitions,
            "provider": s.provider,
            "key_schema": s.key_schema.simple_string() if s.key_schema else None,
            "value_schema": s.value_schema.simple_string() if s.value_schema else None,
        }
        for s in stores
    ]


def log_file_rows(checkpoint: str, listing: Listing, paths: Iterable[str]) -> list[dict[str, Any]]:
    return [
        {
            "checkpoint": checkpoint,
            "path": p,
            "size_bytes": listing.log_files[p].size,
            "modified_at": listing.log_files[p].mtime,
        }
        for p in sorted(paths)
    ]


def state_file_rows(
    checkpoint: str, listing: Listing, paths: Iterable[str], now: datetime
) -> list[dict[str, Any]]:
    rows = []
    for p in sorted(paths):
        f = listing.state_files[p]
        rows.append(
            {
                "checkpoint": checkpoint,
                "operator_id": f.operator_id,
                "store_name": f.store_name,
                "partition_id": f.partition_id,
                "version": f.version,
                "kind": f.kind,
                "path": p,
                "size_bytes": f.stat.size,
                "modified_at": f.stat.mtime,
                "purged": False,
                "first_seen": now,
                "purged_at": None,
            }
        )
    return rows


def version_rows(
    checkpoint: str,
    listing: Listing,
    results: Iterable[ChainResult],
    known_sst_bytes: Mapping[Chain, Mapping[int, int]],
) -> list[dict[str, Any]]:
    """The ``state_versions`` rows of the versions the chains counted, with the byte counts
    their files give (a zip's replay cost needs the live SST bytes of earlier scans too)."""
    by_chain = listing.chains().files
    rows = []
    for result in sorted(results, key=lambda r: r.task.chain):
        op, store, part = chain = result.task.chain
        live = dict(known_sst_bytes.get(chain, {}))
        live.update(
            {c.version: c.sst_bytes_live for c in result.versions if c.sst_bytes_live is not None}
        )
        stats = version_file_stats(
            by_chain.get(chain, {}).values(), [c.version for c in result.versions], live
        )
        for c in result.versions:
            s = stats[c.version]
            rows.append(
                {
                    "checkpoint": checkpoint,
                    "operator_id": op,
                    "store_name": store,
                    "partition_id": part,
                    "version": c.version,
                    "num_keys": c.num_keys,
                    "keys_added": c.keys_added,
                    "keys_updated": c.keys_updated,
                    "keys_removed": c.keys_removed,
                    "delta_bytes": s.delta_bytes,
                    "snapshot_bytes": s.snapshot_bytes,
                    "sst_bytes_live": c.sst_bytes_live,
                    "sst_bytes_uploaded": c.sst_bytes_uploaded,
                    "sst_files_reused": c.sst_files_reused,
                    "sst_files_live": len(c.sst_files) if c.sst_files is not None else None,
                    "versions_since_snapshot": s.versions_since_snapshot,
                    "replay_bytes": s.replay_bytes,
                }
            )
    return rows
