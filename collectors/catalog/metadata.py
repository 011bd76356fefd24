"""A checkpoint's own tables: its stores (like Spark's ``state-metadata``), batches, offsets
and commits, built at each scan from the logs (small; no state is decoded).

Columns:

* ``state_metadata``: ``operatorId``, ``operatorName``, ``stateStoreName``,
  ``numPartitions``, ``minBatchId``, ``maxBatchId`` (Spark's names; DuckDB matches names
  case-insensitively, so ``operatorid`` works too). ``minBatchId`` is the oldest batch whose
  state every partition can still rebuild, ``maxBatchId`` the last committed one.
* ``batches``: ``batch_id``, ``planned`` (an offsets file), ``committed`` (a commit file),
  ``batch_timestamp_ms``, ``batch_watermark_ms`` (from the offsets file).
* ``offsets``: ``batch_id``, ``source_id``, ``offset`` (the source's JSON, as written).
* ``commits``: ``batch_id``, ``next_batch_watermark_ms``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
from stateglass.collectors.errors import CheckpointError

STATE_METADATA = pa.schema(
    [
        ("operatorId", pa.int32()),
        ("operatorName", pa.string()),
        ("stateStoreName", pa.string()),
        ("numPartitions", pa.int32()),
        ("minBatchId", pa.int64()),
        ("maxBatchId", pa.int64()),
    ]
)
BATCHES = pa.schema(
    [
        ("batch_id", pa.int64()),
        ("planned", pa.bool_()),
        ("committed", pa.bool_()),
        ("batch_timestamp_ms", pa.int64()),
        ("batch_watermark_ms", pa.int64()),
    ]
)
OFFSETS = pa.schema([("batch_id", pa.int64()), ("source_id", pa.string()), ("offset", pa.string())])
COMMITS = pa.schema([("batch_id", pa.int64()), ("next_batch_watermark_ms", pa.int64())])


def state_metadata(cp: Checkpoint) -> pa.Table:
    """One row per operator × store."""
    rows: list[tuple[object, ...]] = []
    last = cp.last_committed_batch
    for store in cp.stores():
        source = StateSource(cp, StateRequest(store.operator_id, store.store_name))
        try:
            oldest = source.oldest_readable_batch()
        except CheckpointError:
            oldest = None  # a store whose files cannot be listed still has its row
        rows.append(
            (
                store.operator_id,
                store.operator_name,
                store.store_name,
                store.num_partitions,
                oldest,
                last,
            )
        )
    return _table(STATE_METADATA, rows)


def batches(cp: Checkpoint) -> pa.Table:
    """One row per batch with an offsets or a commit file."""
    planned, committed = set(cp.offset_batch_ids), set(cp.commit_batch_ids)
    rows: list[tuple[object, ...]] = []
    for b in sorted(planned | committed):
        seq = cp.offsets(b) if b in planned else None
        rows.append(
            (
                b,
                b in planned,
                b in committed,
                seq.batch_timestamp_ms if seq else None,
                seq.batch_watermark_ms if seq else None,
            )
        )
    return _table(BATCHES, rows)


def offsets(cp: Checkpoint) -> pa.Table:
    """One row per batch × source."""
    rows = [
        (b, source.source_id, source.offset_json)
        for b in cp.offset_batch_ids
        for source in cp.offsets(b).sources
    ]
    return _table(OFFSETS, rows)


def commits(cp: Checkpoint) -> pa.Table:
    """One row per commit file."""
    rows = [(b, cp.commit(b).next_batch_watermark_ms) for b in cp.commit_batch_ids]
    return _table(COMMITS, rows)


METADATA: dict[str, tuple[pa.Schema, Callable[[Checkpoint], pa.Table]]] = {
    "state_metadata": (STATE_METADATA, state_metadata),
    "batches": (BATCHES, batches),
    "offsets": (OFFSETS, offsets),
    "commits": (COMMITS, commits),
}


def _table(schema: pa.Schema, rows: Sequence[tuple[object, ...]]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    return pa.table(
        [pa.array(list(c), type=f.type) for c, f in zip(columns, schema, strict=True)],
        schema=schema,
    )
