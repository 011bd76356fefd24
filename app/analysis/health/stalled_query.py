"""Stalled query: no commit for much longer than the query's usual trigger interval.

On a checkpoint whose file times look copied (:mod:`~stateglass.app.analysis.clock`), no
query writes to it: the rule does not judge, and says when the last batch ran on Spark's
clock, as the Overview card does.
"""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from stateglass.app.analysis.clock import NOT_ON_COPY, batch_ran, file_times
from stateglass.app.analysis.health.base import (
    ERR,
    OK,
    SKIP,
    WARN,
    Context,
    Facts,
    Finding,
    median,
    query_finding,
)
from stateglass.parsers.units import fmt_duration

if TYPE_CHECKING:
    from stateglass.app.analysis.thresholds import HealthConfig


class StalledQuery:
    id = "stalled_query"
    title = "Stalled query"
    hint = (
        "If the query should be running, look at the driver: a hung job, lost executors, or a "
        "source that stopped delivering. A query stopped on purpose, or an idle source (Spark "
        "writes no batch without new data), looks the same: then set [stalled_query] "
        "enabled = false for it."
    )

    def check(self, ctx: Context) -> list[Finding]:
        return self.at(self.facts(ctx), ctx.now, ctx.config)

    def facts(self, ctx: Context) -> dict[str, Any]:
        """The last committed batch, when, and the median trigger interval before it."""
        rows = ctx.rows(
            "SELECT batch_id, committed_at, batch_timestamp_ms FROM batches WHERE checkpoint = ? "
            "AND committed ORDER BY batch_id DESC LIMIT 1"
        )
        if not rows:
            return {}
        batch, last, triggered_ms = rows[0]
        copied = file_times(ctx.conn, ctx.checkpoint).note
        if copied:
            return {"batch": batch, "copied": copied, "triggered_ms": triggered_ms}
        if last is None:
            return {}
        intervals = recent_intervals(ctx, ctx.config.stalled_query.window)
        return {
            "batch": batch,
            "last": last.isoformat(),
            "typical": median(intervals),
            "intervals": len(intervals),
        }

    def at(self, facts: Facts, now: datetime, config: HealthConfig) -> list[Finding]:
        cfg = config.stalled_query
        if not facts:
            return [query_finding(self, OK, "no batch committed yet: nothing to compare with")]
        if "copied" in facts:
            ran = batch_ran(facts["batch"], facts["triggered_ms"], now)
            text = f"{NOT_ON_COPY}: the last committed {ran}; {facts['copied']}"
            return [query_finding(self, SKIP, text)]
        last = datetime.fromisoformat(facts["last"])
        idle = (now - last).total_seconds()
        typical = facts["typical"]
        since = (
            f"no commit for {fmt_duration(idle)} since batch {facts['batch']} "
            f"({last:%Y-%m-%d %H:%M:%S} UTC)"
        )
        if typical is None:
            return [
                query_finding(self, OK, f"{since}; fewer than 2 batches, no trigger interval yet")
            ]
        warn_at = max(cfg.warn_factor * typical, cfg.min_seconds)
        err_at = max(cfg.err_factor * typical, cfg.min_seconds) if cfg.err_factor > 0 else None
        text = (
            f"{since}; median trigger interval {fmt_duration(typical)} over {facts['intervals']} "
            f"batches, WARN above {fmt_duration(warn_at)}"
            + (f", ERR above {fmt_duration(err_at)}" if err_at is not None else "")
        )
        if err_at is not None and idle > err_at:
            return [query_finding(self, ERR, text, self.hint)]
        if idle > warn_at:
            return [query_finding(self, WARN, text, self.hint)]
        return [query_finding(self, OK, text)]


def recent_intervals(ctx: Context, window: int) -> list[float]:
    """The newest ``window`` positive trigger intervals in seconds, newest first: what the
    ``trigger_intervals`` view gives, read from the newest batches only (the view's ``lag``
    runs over every batch, 259,200 at a month), going further back only while too few."""
    fetch = 2 * window + 2
    while True:
        stamps = [
            ts
            for (ts,) in ctx.rows(
                "SELECT batch_timestamp_ms FROM batches WHERE checkpoint = ? "
                "ORDER BY batch_id DESC LIMIT ?",
                [fetch],
            )
        ]
        out: list[float] = []
        for newer, older in pairwise(stamps):
            if newer is not None and older is not None and newer - older > 0:
                out.append((newer - older) / 1000)
                if len(out) == window:
                    return out
        if len(stamps) < fetch:
            return out
        fetch *= 4
