"""Stuck batch: offsets written (the batch started) but no commit for a long time.

Not judged on a checkpoint whose file times look copied (no query writes to it).
"""

from __future__ import annotations

from datetime import datetime
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
from stateglass.parsers.units import fmt_age, fmt_duration

if TYPE_CHECKING:
    from stateglass.app.analysis.thresholds import HealthConfig


class StuckBatch:
    id = "stuck_batch"
    title = "Stuck batch"
    hint = (
        "The batch started and never finished: the query crashed or hangs inside it. Look for "
        "the batch id in the driver log (a long task, a failing sink, a lost executor). On "
        "restart Spark runs the batch again from its offsets/N."
    )

    def check(self, ctx: Context) -> list[Finding]:
        return self.at(self.facts(ctx), ctx.now, ctx.config)

    def facts(self, ctx: Context) -> dict[str, Any]:
        """The newest batch, when it started if it is not committed, and the median batch."""
        newest = ctx.rows(
            "SELECT batch_id, committed, offsets_written_at, batch_timestamp_ms FROM batches "
            "WHERE checkpoint = ? ORDER BY batch_id DESC LIMIT 1"
        )
        if not newest:
            return {}
        batch, committed, started, triggered_ms = newest[0]
        # Spark runs one batch at a time: only the newest can be running.
        if committed or started is None:
            return {"batch": batch, "started": None}
        copied = file_times(ctx.conn, ctx.checkpoint).note
        if copied:
            return {"batch": batch, "copied": copied, "triggered_ms": triggered_ms}
        durations = [
            r[0] / 1000
            for r in ctx.rows(
                "SELECT duration_ms FROM batch_durations WHERE checkpoint = ? "
                "AND duration_ms >= 0 ORDER BY batch_id DESC LIMIT ?",
                [ctx.config.stuck_batch.window],
            )
        ]
        return {"batch": batch, "started": started.isoformat(), "typical": median(durations)}

    def at(self, facts: Facts, now: datetime, config: HealthConfig) -> list[Finding]:
        cfg = config.stuck_batch
        if not facts:
            return [query_finding(self, OK, "no batch yet")]
        batch = facts["batch"]
        if "copied" in facts:
            ran = batch_ran(batch, facts["triggered_ms"], now)
            text = f"{NOT_ON_COPY}: {ran} and is not committed; {facts['copied']}"
            return [query_finding(self, SKIP, text)]
        if facts["started"] is None:
            return [query_finding(self, OK, f"every batch is committed (last: batch {batch})")]
        started = datetime.fromisoformat(facts["started"])
        typical = facts["typical"]
        warn_at = max(cfg.warn_factor * (typical or 0), cfg.warn_min_seconds)
        err_at = max(cfg.err_factor * (typical or 0), cfg.err_min_seconds)
        age = (now - started).total_seconds()
        text = (
            f"batch {batch} started {fmt_age(age)} ({started:%Y-%m-%d %H:%M:%S} UTC) "
            "and is not committed; "
            + (
                f"median batch {fmt_duration(typical)}"
                if typical is not None
                else "no duration yet"
            )
            + f", WARN above {fmt_duration(warn_at)}, ERR above {fmt_duration(err_at)}"
        )
        if age > err_at:
            return [query_finding(self, ERR, text, self.hint)]
        if age > warn_at:
            return [query_finding(self, WARN, text, self.hint)]
        return [query_finding(self, OK, text)]
