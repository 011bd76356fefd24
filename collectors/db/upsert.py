"""Rows into a table as one statement: the writer's bulk upsert, and a keyed delete.

Only the writer's transactions call these (:mod:`stateglass.collectors.db.writer`,
:mod:`stateglass.collectors.db.history_rollup`); column types and conflict keys come from the
tables' DDL (:mod:`stateglass.collectors.db.schema`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stateglass.collectors.db.schema import COLUMNS, KEYS

if TYPE_CHECKING:
    import duckdb


def upsert(
    conn: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[Mapping[str, Any]],
    on_conflict: str | None = None,
) -> None:
    """Insert ``rows`` into ``table``, replacing rows with the same primary key.


    ``on_conflict`` instead names the columns to update when the key exists (the others
    keep their values). Rows go in as one statement, each column one list parameter
    cast to the table's type and unnested side by side: ``executemany`` is 100x slower,
    and registering numpy arrays or an Arrow table would import numpy (0.1 s) or pandas
    (0.7 s), which a short ``collect`` process pays for nothing. The cast to the column's
    own type keeps DuckDB from guessing a type from the first values.
    """
    if not rows:
        return
    names = list(rows[0])
    types = COLUMNS[table]
    unknown = [n for n in names if n not in types]
    if unknown:
        raise ValueError(f"{table} has no column {', '.join(unknown)}")
    select = ", ".join(f"unnest(?::{types[n]}[]) AS {n}" for n in names)
    values = [[r.get(n) for r in rows] for n in names]
    if on_conflict is None:
        conn.execute(f"INSERT OR REPLACE INTO {table} BY NAME SELECT {select}", values)
    else:
        keys = ", ".join(KEYS[table])
        # A column the rows do not carry is not theirs to change: it keeps its value.
        sets = ", ".join(f"{c} = excluded.{c}" for c in on_conflict.split(",") if c in names)
        action = f"DO UPDATE SET {sets}" if sets else "DO NOTHING"
        conn.execute(
            f"INSERT INTO {table} BY NAME SELECT {select} ON CONFLICT ({keys}) {action}",
            values,
        )


def delete_where(conn: duckdb.DuckDBPyConnection, table: str, where: Mapping[str, Any]) -> None:
    """Delete the rows of ``table`` whose columns equal ``where``'s values."""
    clause = " AND ".join(f"{c} = ?" for c in where)
    conn.execute(f"DELETE FROM {table} WHERE {clause}", list(where.values()))
