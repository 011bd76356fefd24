"""What the progress rules share: the newest progress events of the checkpoint's query.

Progress comes from Spark's ``StreamingQueryProgress`` events (``--progress PATH``), joined to
the checkpoint by the query id of its ``metadata`` file. Without any, a rule says so in one
SKIP (not judged) line instead of judging.
"""

from __future__ import annotations

from typing import Any

from stateglass.app.analysis.health.base import SKIP, Context, Finding, Rule

NO_PROGRESS = (
    "no progress events for this query, not judged (add --progress PATH to collect Spark's "
    "event log or the listener's directory)"
)


def recent(ctx: Context, columns: str, window: int, where: str = "TRUE") -> list[tuple[Any, ...]]:
    """``columns`` of the newest ``window`` progress events (oldest first), every run."""
    rows = ctx.rows(
        f"SELECT {columns} FROM checkpoints c JOIN progress p ON p.query_id = c.query_id "
        f"WHERE c.checkpoint = ? AND ({where}) ORDER BY p.timestamp DESC, p.batch_id DESC "
        "LIMIT ?",
        [window],
    )
    return rows[::-1]


def recent_state(
    ctx: Context, columns: str, window: int, where: str = "TRUE"
) -> dict[tuple[int, str], list[tuple[Any, ...]]]:
    """``columns`` of each stateful operator's newest ``window`` progress entries, oldest
    first, by ``(operator_index, operator_name)``."""
    rows = ctx.rows(
        f"SELECT s.operator_index, coalesce(s.operator_name, '?'), {columns} "
        "FROM checkpoints c JOIN progress_state s ON s.query_id = c.query_id "
        "JOIN progress p ON p.query_id = s.query_id AND p.run_id = s.run_id "
        "AND p.batch_id = s.batch_id "
        f"WHERE c.checkpoint = ? AND ({where}) "
        "QUALIFY row_number() OVER (PARTITION BY s.operator_index "
        "ORDER BY p.timestamp DESC, p.batch_id DESC) <= ? "
        "ORDER BY s.operator_index, p.timestamp, p.batch_id",
        [window],
    )
    out: dict[tuple[int, str], list[tuple[Any, ...]]] = {}
    for row in rows:
        out.setdefault((row[0], row[1]), []).append(row[2:])
    return out


def has_progress(ctx: Context) -> bool:
    rows = ctx.rows(
        "SELECT count(*) FROM checkpoints c JOIN progress p ON p.query_id = c.query_id "
        "WHERE c.checkpoint = ?"
    )
    return bool(rows[0][0])


def not_judged(ctx: Context, rule: Rule) -> list[Finding]:
    return [ctx.finding(rule, SKIP, NO_PROGRESS)]


def batches(rows: list[tuple[Any, ...]]) -> str:
    """``batches 12..21`` from rows whose first column is the batch id."""
    return f"batches {rows[0][0]}..{rows[-1][0]}" if rows else "no batches"


# A run's first batch loads the store and warms the JVM: its commit time and memory (one
# version cached instead of the usual two) say nothing about growth.
AFTER_WARM_UP = (
    "s.batch_id > (SELECT min(f.batch_id) FROM progress f "
    "WHERE f.query_id = s.query_id AND f.run_id = s.run_id)"
)
