"""Rows per transformWithState state variable, as Spark's reader returns them.

``variable_rows`` (written by every scan, ``collectors/scan/variable_counts.py``) holds, per
column family of a transformWithState store, the rows ``stateglass state --state-var`` or
``--read-timers`` return and the raw RocksDB keys, at the newest version of each partition a
scan read. A store's ``num_keys`` is the raw keys of every column family summed (TTL and timer
indexes included), so these are the numbers that mean rows.
"""

from __future__ import annotations

import pandas as pd

from stateglass.app.queries.connection import read_frame

# Order shown: the state variables, then the timers, the TTL indexes and the internal ones.
_ROLE_ORDER = (
    "CASE any_value(role) WHEN 'state variable' THEN 0 WHEN 'timers' THEN 1 "
    "WHEN 'ttl index' THEN 2 ELSE 3 END"
)


def variable_rows(
    db: str,
    checkpoint: str | None = None,
    operator_id: int | None = None,
    store_name: str | None = None,
) -> pd.DataFrame:
    """Per column family of each transformWithState store (one checkpoint or store, or all):
    ``rows`` (NULL for an internal index), ``raw_keys``, ``version`` (the newest counted),
    ``partitions`` (counted there), summed over each partition's newest counted version.

    Columns: checkpoint, operator_id, store_name, column_family, role, kind, rows, raw_keys,
    version, partitions.
    """
    where, params = [], []
    for column, value in (
        ("checkpoint", checkpoint),
        ("operator_id", operator_id),
        ("store_name", store_name),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    cond = ("WHERE " + " AND ".join(where)) if where else ""
    return read_frame(db, newest_rows_sql(cond), params)


def newest_rows_sql(cond: str = "") -> str:
    """The SQL of :func:`variable_rows`, ``cond`` a WHERE clause on ``variable_rows`` (the
    /metrics gauge reads every store's)."""
    return f"""
        WITH newest AS (
            SELECT checkpoint, operator_id, store_name, partition_id, max(version) AS version
            FROM variable_rows {cond} GROUP BY ALL
        )
        SELECT checkpoint, operator_id, store_name, column_family, any_value(role) AS role,
               any_value(kind) AS kind, sum(row_count)::BIGINT AS rows,
               sum(raw_keys)::BIGINT AS raw_keys, max(version) AS version,
               count(*) AS partitions
        FROM variable_rows JOIN newest
            USING (checkpoint, operator_id, store_name, partition_id, version)
        GROUP BY checkpoint, operator_id, store_name, column_family
        ORDER BY checkpoint, operator_id, store_name, {_ROLE_ORDER}, column_family
    """


def rows_line(frame: pd.DataFrame) -> str:
    """One store's rows as a sentence: ``stats 13 · by_kind 24 · recent 28 · timers 13 ·
    TTL entries 0`` (the internal indexes left out); empty without rows."""
    parts = []
    ttl = 0
    has_ttl = False
    for r in frame.itertuples():
        if r.role == "state variable":
            parts.append(f"{r.column_family} {int(r.rows):,}")
        elif r.role == "timers":
            parts.append(f"timers {int(r.rows):,}")
        elif r.role == "ttl index":
            has_ttl = True
            ttl += int(r.rows)
    if has_ttl:
        parts.append(f"TTL entries {ttl:,}")
    return " · ".join(parts)


def rows_lines(db: str, checkpoints: tuple[str, ...]) -> dict[str, str]:
    """Per checkpoint of ``checkpoints`` with a transformWithState store: its rows per state
    variable in one line, a store at a time (``operator 0 default: stats 13 · …``)."""
    if not checkpoints:
        return {}
    marks = ", ".join("?" for _ in checkpoints)
    frame = read_frame(db, newest_rows_sql(f"WHERE checkpoint IN ({marks})"), list(checkpoints))
    out: dict[str, list[str]] = {}
    for (checkpoint, op, store), rows in frame.groupby(
        ["checkpoint", "operator_id", "store_name"], sort=False
    ):
        line = rows_line(rows)
        if line:
            out.setdefault(str(checkpoint), []).append(f"operator {op} {store}: {line}")
    return {c: "; ".join(lines) for c, lines in out.items()}
