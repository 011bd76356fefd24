"""What every health rule shares: the :class:`Finding` it returns, the tiny :class:`Rule`
interface, and the :class:`Context` it reads the history database through (read-only).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import duckdb

    from stateglass.app.analysis.thresholds import HealthConfig

OK = "OK"
WARN = "WARN"
ERR = "ERR"
# A rule that could not judge (no progress events, a copy that no query runs): counted apart
# from OK, and never the worst status.
SKIP = "SKIP"
STATUSES = (OK, WARN, ERR)


@dataclass(frozen=True)
class Finding:
    """One verdict of one rule, for the whole query or for one store (or partition)."""

    rule: str  # stable id, e.g. "stalled_query"
    title: str
    status: str  # "OK" | "WARN" | "ERR" | "SKIP" (not judged)
    finding: str  # one line that quotes the numbers
    hint: str  # what to do
    operator_id: int | None = None
    store_name: str | None = None
    partition_id: int | None = None

    @property
    def where(self) -> str:
        """``op 0/default p3``, or "" for a query-wide finding."""
        if self.operator_id is None:
            return ""
        text = f"op {self.operator_id}/{self.store_name}"
        return text + (f" p{self.partition_id}" if self.partition_id is not None else "")


def worst(findings: Iterable[Finding]) -> str:
    """The most severe status among ``findings`` (``"OK"`` when there are none); a rule that
    did not judge (``SKIP``) counts as none."""
    judged = (f.status for f in findings if f.status != SKIP)
    return max(judged, key=STATUSES.index, default=OK)


@dataclass(frozen=True)
class Store:
    operator_id: int
    store_name: str
    operator_name: str | None
    num_partitions: int | None
    provider: str | None


@dataclass
class Context:
    """A rule's view of one checkpoint in the history database, through one read-only cursor."""

    conn: duckdb.DuckDBPyConnection
    checkpoint: str
    now: datetime  # naive UTC, like every timestamp in the database
    config: HealthConfig
    # compat's prediction for a changed query (``check --next``), and that query's checkpoint
    compat: Any = None
    next_name: str = ""
    # What several rules derive alike, derived once per evaluation (see live_chain_files).
    shared: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql``; its first ``?`` is the checkpoint, ``params`` fill the others."""
        return self.conn.execute(sql, [self.checkpoint, *params]).fetchall()

    @cached_property
    def stores(self) -> list[Store]:
        return [
            Store(*row)
            for row in self.rows(
                "SELECT operator_id, store_name, operator_name, num_partitions, provider "
                "FROM operators WHERE checkpoint = ? ORDER BY operator_id, store_name"
            )
        ]

    @cached_property
    def pinned_conf(self) -> dict[str, str]:
        rows = self.rows("SELECT pinned_conf FROM checkpoints WHERE checkpoint = ?")
        if not rows or not rows[0][0]:
            return {}
        conf = json.loads(rows[0][0])
        return conf if isinstance(conf, dict) else {}

    def spark_conf(self, key: str, field: str) -> tuple[int, str]:
        """``(value, where it came from)`` of Spark conf ``key``: the checkpoint's pinned conf
        when it has it, else ``[spark] field`` of the config (Spark's default unless set)."""
        from stateglass.app.analysis.thresholds import SparkConfig

        raw = self.pinned_conf.get(key)
        if raw is not None:
            try:
                return int(str(raw).strip()), "pinned in offsets/"
            except ValueError:
                pass
        value = getattr(self.config.spark, field)
        return value, "Spark's default" if value == getattr(SparkConfig(), field) else "config"

    def finding(
        self,
        rule: Rule,
        status: str,
        text: str,
        hint: str = "",
        store: Store | None = None,
        partition_id: int | None = None,
    ) -> Finding:
        return Finding(
            rule=rule.id,
            title=rule.title,
            status=status,
            finding=text,
            hint=hint,
            operator_id=store.operator_id if store else None,
            store_name=store.store_name if store else None,
            partition_id=partition_id,
        )


def query_finding(rule: Rule, status: str, text: str, hint: str = "") -> Finding:
    """A finding about the whole query (no store): what a clock rule gives without a context."""
    return Finding(rule=rule.id, title=rule.title, status=status, finding=text, hint=hint)


class Rule(Protocol):
    """A health rule: a stable id, a title, and a function of the history."""

    id: str
    title: str

    def check(self, ctx: Context) -> list[Finding]:
        """At least one finding; an OK finding says what was measured."""
        ...


# What a clock rule reads of the history: JSON values only (str, int, float, bool, None,
# lists, dicts), so that facts stored as JSON give the very findings fresh ones give.
Facts = Mapping[str, Any]


@runtime_checkable
class ClockRule(Rule, Protocol):
    """A rule whose verdict moves with the clock between scans (a query stalls, a file ages).

    Split in two so that what the history says is read once per scan and the clock is applied
    at every read: ``check(ctx)`` is ``at(facts(ctx), ctx.now, ctx.config)``. The facts hold
    for any moment from ``ctx.now`` on (not before it: files old enough then may be counted
    together), until the next scan.
    """

    def facts(self, ctx: Context) -> dict[str, Any]:
        """What the history says, apart from the clock."""
        ...

    def at(self, facts: Facts, now: datetime, config: HealthConfig) -> list[Finding]:
        """The findings at ``now`` (naive UTC) with ``config`` (the one ``facts`` was read with)."""
        ...


# ---- formatting shared by the findings ------------------------------------------------------


def fmt_ratio(x: float) -> str:
    return f"{x:.1f}x"


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None
