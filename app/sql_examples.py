"""SQL the app writes for the user: example queries per store kind, and the queries pages link to.

Pure text from the catalog's names (``collectors/catalog/names.py``) and a table's columns; no
session, no DuckDB. The SQL page offers :func:`examples`; the State, Browse and Health pages
open it with :func:`store_rows`, :func:`partition_sizes` and :func:`overdue_keys`.

Example::

    target = leak_target("window", "window.end", "default")
    ref = table_ref(schema_names(checkpoints)[cp], operator_id=0, label=target.label)
    overdue_keys(ref, target, watermark_ms=1_700_000_000_000)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stateglass.collectors.catalog.names import TIMERS as TIMERS_LABEL
from stateglass.collectors.catalog.names import quoted, state_table
from stateglass.collectors.scan.eviction_rules import (
    DEDUP,
    DEDUP_WITHIN,
    JOIN_KEY,
    JOIN_VALUE,
    SESSION,
    TIMEOUT,
    TIMERS,
    WINDOW,
)

if TYPE_CHECKING:
    from stateglass.collectors.catalog import TableEntry

LIMIT = 100


@dataclass(frozen=True)
class Example:
    """One example query: what it asks, and its SQL."""

    title: str
    sql: str


def table_ref(schema: str, operator_id: int, label: str) -> str:
    """``"schema"."op0_default"``: a state table as SQL names it (``label``: store or variable)."""
    return f"{quoted(schema)}.{quoted(state_table(operator_id, label))}"


def field_path(side: str, field: str) -> str:
    """``key."window"."end"``: a dotted field of the key or value row as a SQL expression."""
    return ".".join([side, *(quoted(p) for p in field.split(".") if p)])


def store_rows(ref: str, batch_id: int | None = None, partition: int | None = None) -> str:
    """A store's rows at ``batch_id`` (None: the last committed batch), in one partition or all."""
    where = [f"batch_id = {int(batch_id)}"] if batch_id is not None else []
    where += [f"partition_id = {int(partition)}"] if partition is not None else []
    clause = f"\nWHERE {' AND '.join(where)}" if where else ""
    return f"SELECT *\nFROM {ref}{clause}\nLIMIT {LIMIT}"


def store_history(checkpoint: str, operator_id: int, store_name: str) -> str:
    """A store's keys and bytes per batch, from the history database (what the State page draws)."""
    return (
        "SELECT version - 1 AS batch_id, CAST(num_keys AS BIGINT) AS keys,\n"
        "       CAST(keys_added AS BIGINT) AS added, CAST(keys_removed AS BIGINT) AS removed,\n"
        "       CAST(bytes AS BIGINT) AS bytes\n"
        "FROM history.store_versions\n"
        f"WHERE checkpoint = {literal(checkpoint)} AND operator_id = {int(operator_id)}\n"
        f"  AND store_name = {literal(store_name)}\n"
        "ORDER BY version"
    )


def literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def partition_sizes(ref: str) -> str:
    """Rows per partition at the last committed batch: where the state sits."""
    return (
        f"SELECT partition_id, count(*) AS rows\nFROM {ref}\n"
        "GROUP BY partition_id\nORDER BY rows DESC"
    )


@dataclass(frozen=True)
class LeakTarget:
    """Where an eviction rule's event time is in the catalog: the table's label (store,
    variable or ``timers``), the column as SQL, and the test against a watermark in ms."""

    label: str
    column: str
    test: str  # "{column}" and "{wm}" to fill

    def where(self, watermark_ms: int) -> str:
        return self.test.format(column=self.column, wm=int(watermark_ms))


def leak_target(kind: str, field: str, store_name: str) -> LeakTarget | None:
    """How to find the keys Spark should have evicted, by the rule's kind
    (``collectors/scan/eviction_rules.py``); None for kinds that evict by no event time."""
    at_or_before = "{column} <= epoch_ms({wm})"
    if kind in (WINDOW, DEDUP):
        return LeakTarget(store_name, field_path("key", field), at_or_before)
    if kind == JOIN_KEY:
        return LeakTarget(store_name, field_path("key", field.removeprefix("key ")), at_or_before)
    if kind in (SESSION, JOIN_VALUE):
        return LeakTarget(store_name, field_path("value", field), at_or_before)
    if kind == DEDUP_WITHIN:
        return LeakTarget(store_name, field_path("value", field), "{column} <= {wm} * 1000")
    if kind == TIMEOUT:
        return LeakTarget(
            store_name, field_path("value", field), "{column} <> -1 AND {column} < {wm}"
        )
    if kind == TIMERS:
        # Spark's reader of registered timers names the expiry column itself.
        return LeakTarget(TIMERS_LABEL, "expiration_timestamp_ms", "{column} < {wm}")
    return None


def overdue_keys(ref: str, target: LeakTarget, watermark_ms: int, limit: int | None = LIMIT) -> str:
    """Rows whose event time is at or before the watermark: what Spark should have evicted."""
    return (
        f"-- rows older than the watermark of the newest audited batch ({int(watermark_ms)} ms)\n"
        f"SELECT *\nFROM {ref}\nWHERE {target.where(watermark_ms)}\nORDER BY {target.column}"
        + ("" if limit is None else f"\nLIMIT {int(limit)}")
    )


def examples(
    tables: Sequence[TableEntry],
    columns: Callable[[TableEntry], Sequence[tuple[str, str]]],
    retained: Mapping[tuple[int, str], tuple[int, int]],
) -> list[Example]:
    """Example queries over one checkpoint's ``tables``, with their real names and batches.

    ``columns(entry)`` gives a table's ``(name, type)`` pairs; ``retained`` the first and last
    retained batch id per ``(operator id, store name)`` (the ``state_metadata`` table's).
    """
    out: list[Example] = []
    states = [t for t in tables if t.kind == "state"]
    for entry in states:
        names = {name for name, _ in columns(entry)}
        span = retained.get((entry.operator_id or 0, entry.store_name or ""))
        out += _per_table(entry, names, span)
    out += _join_sides(states)
    return out


def _ref(entry: TableEntry) -> str:
    return f"{quoted(entry.schema)}.{quoted(entry.table)}"


def _per_table(entry: TableEntry, names: set[str], span: tuple[int, int] | None) -> list[Example]:
    table, ref = entry.table, _ref(entry)
    out = []
    if "value" in names:
        out.append(
            Example(
                f"{table}: the 20 biggest values",
                f"SELECT key, value, length(CAST(value AS VARCHAR)) AS value_chars\nFROM {ref}\n"
                "ORDER BY value_chars DESC\nLIMIT 20",
            )
        )
    for element, kind in (("list_element", "list"), ("user_map_key", "map")):
        if element in names:
            out.append(
                Example(
                    f"{table}: {kind} size per key",
                    f"SELECT key, count(*) AS elements\nFROM {ref}\n"
                    "GROUP BY key\nORDER BY elements DESC\nLIMIT 20",
                )
            )
    if span is not None and span[0] < span[1]:
        out += _over_batches(table, ref, span, with_value="value" in names)
    out.append(Example(f"{table}: rows per partition", partition_sizes(ref)))
    return out


def _over_batches(table: str, ref: str, span: tuple[int, int], with_value: bool) -> list[Example]:
    """Questions across two retained batches: a constant ``batch_id`` reads just that batch."""
    first, last = span
    since = max(first, last - 3)
    out = [
        Example(
            f"{table}: keys added between batch {first} and batch {last}",
            f"SELECT key FROM {ref} WHERE batch_id = {last}\n"
            f"EXCEPT\nSELECT key FROM {ref} WHERE batch_id = {first}\nLIMIT {LIMIT}",
        )
    ]
    if with_value:
        out.append(
            Example(
                f"{table}: keys not updated since batch {since}",
                f"-- keys whose value now is the one they had at batch {since}\n"
                f"SELECT cur.key, cur.value\nFROM {ref} AS cur\n"
                f"JOIN (SELECT key, value FROM {ref} WHERE batch_id = {since}) AS old\n"
                f"  ON cur.key = old.key AND cur.value = old.value\nLIMIT {LIMIT}",
            )
        )
    return out


def _join_sides(states: Sequence[TableEntry]) -> list[Example]:
    """Key by key, how many values each side of a stream-stream join holds."""
    by_store = {(t.operator_id, t.store_name): t for t in states}
    out = []
    for (op, store), left in by_store.items():
        right = by_store.get((op, "right-keyToNumValues"))
        if store != "left-keyToNumValues" or right is None:
            continue
        out.append(
            Example(
                f"operator {op} join: both sides, key by key",
                "SELECT coalesce(l.key, r.key) AS key, l.value.value AS left_values,\n"
                "       r.value.value AS right_values\n"
                f"FROM {_ref(left)} AS l\n"
                f"FULL OUTER JOIN {_ref(right)} AS r ON l.key = r.key\n"
                "ORDER BY coalesce(l.value.value, 0) + coalesce(r.value.value, 0) DESC\n"
                f"LIMIT {LIMIT}",
            )
        )
    return out
