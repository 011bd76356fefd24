"""The eviction audit: how Spark evicts a store's keys, and the keys it should have evicted."""

from __future__ import annotations

import pandas as pd

from stateglass.app.queries.connection import STORE_WHERE, read_frame


def eviction_rules(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """How Spark evicts the store (one row; transformWithState: one per audited variable)."""
    return read_frame(
        db,
        "SELECT state_var, operator_name, kind, audited, predicate, event_time_field, cause, "
        f"fix FROM eviction_rules WHERE {STORE_WHERE} ORDER BY state_var",
        [checkpoint, operator_id, store_name],
    )


def eviction_audit(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Per audited version: keys, overdue keys (summed over partitions), the watermark, the
    oldest event time and which partitions hold overdue keys."""
    return read_frame(
        db,
        "SELECT state_var, version, version - 1 AS batch_id, max(watermark_ms) AS watermark_ms, "
        "sum(keys) AS keys, sum(overdue_keys) AS overdue_keys, "
        "count(overdue_keys) AS audited_partitions, count(*) AS partitions, "
        "min(oldest_event_ms) AS oldest_event_ms, "
        "string_agg(partition_id::VARCHAR, ',' ORDER BY partition_id) "
        "FILTER (WHERE overdue_keys > 0) AS overdue_partitions "
        f"FROM eviction_audit WHERE {STORE_WHERE} GROUP BY state_var, version "
        "ORDER BY state_var, version",
        [checkpoint, operator_id, store_name],
    )


def newest_watermarks(db: str, checkpoint: str) -> pd.DataFrame:
    """Per audited store (or state variable) of the checkpoint: its rule, and the watermark
    of its newest audited version (what the state leak rule judged against)."""
    return read_frame(
        db,
        "SELECT r.operator_id, r.store_name, r.state_var, r.kind, r.event_time_field, "
        "arg_max(a.watermark_ms, a.version) AS watermark_ms, max(a.version) AS version "
        "FROM eviction_rules r JOIN eviction_audit a USING (checkpoint, operator_id, "
        "store_name, state_var) WHERE r.checkpoint = ? AND r.audited AND a.watermark_ms "
        "IS NOT NULL GROUP BY ALL ORDER BY r.operator_id, r.store_name, r.state_var",
        [checkpoint],
    )
