"""Stuck batch: offsets written (the batch started) but no commit for a long time."""

from __future__ import annotations

from stateglass.collectors.health.base import ERR, OK, WARN, Context, Finding, fmt_seconds, median


class StuckBatch:
    id = "stuck_batch"
    title = "Stuck batch"
    hint = (
        "The batch started and never finished: the query crashed or hangs inside it. Look for "
        "the batch id in the driver log (a long task, a failing sink, a lost executor). On "
        "restart Spark runs the batch again from its offsets/N."
    )

    def check(self, ctx: Context) -> list[Finding]:
        cfg = ctx.config.stuck_batch
        newest = ctx.rows(
            "SELECT batch_id, committed, offsets_written_at FROM batches WHERE checkpoint = ? "
            "ORDER BY batch_id DESC LIMIT 1"
        )
        if not newest:
            return [ctx.finding(self, OK, "no batch yet")]
        batch, committed, started = newest[0]
        # Spark runs one batch at a time: only the newest can be running.
        if committed or started is None:
            return [ctx.finding(self, OK, f"every batch is committed (last: batch {batch})")]
        durations = [
            r[0] / 1000
            for r in ctx.rows(
                "SELECT duration_ms FROM batch_durations WHERE checkpoint = ? "
                "AND duration_ms >= 0 ORDER BY batch_id DESC LIMIT ?",
                [cfg.window],
            )
        ]
        typical = median(durations)
        warn_at = max(cfg.warn_factor * (typical or 0), cfg.warn_min_seconds)
        err_at = max(cfg.err_factor * (typical or 0), cfg.err_min_seconds)
        age = (ctx.now - started).total_seconds()
        text = (
            f"batch {batch} started {fmt_seconds(age)} ago ({started:%Y-%m-%d %H:%M:%S} UTC) "
            "and is not committed; "
            + (f"median batch {fmt_seconds(typical)}" if typical is not None else "no duration yet")
            + f", WARN above {fmt_seconds(warn_at)}, ERR above {fmt_seconds(err_at)}"
        )
        if age > err_at:
            return [ctx.finding(self, ERR, text, self.hint)]
        if age > warn_at:
            return [ctx.finding(self, WARN, text, self.hint)]
        return [ctx.finding(self, OK, text)]
