"""Late rows: rows dropped by the watermark (they arrived after their window closed)."""

from __future__ import annotations

from stateglass.app.analysis.health import progress_rows as pr
from stateglass.app.analysis.health.base import ERR, OK, WARN, Context, Finding


class LateRows:
    id = "late_rows"
    title = "Late rows dropped"
    hint = (
        "Rows older than the watermark are dropped without an error: their results are lost. "
        "If they matter, allow more lateness (a longer withWatermark delay, at the cost of "
        "more state), fix the producer's clock or ordering, or divert late rows to a side "
        "output before the stateful operator."
    )

    def check(self, ctx: Context) -> list[Finding]:
        cfg = ctx.config.late_rows
        if not pr.has_progress(ctx):
            return pr.not_judged(ctx, self)
        rows = pr.recent(ctx, "p.batch_id, p.num_input_rows", cfg.window)
        by_op = pr.recent_state(ctx, "s.batch_id, s.num_rows_dropped_by_watermark", cfg.window)
        dropped = sum(r[1] or 0 for ops in by_op.values() for r in ops)
        worst = [
            f"{index} {name}: {sum(r[1] or 0 for r in ops):,}"
            for (index, name), ops in by_op.items()
            if any(r[1] for r in ops)
        ]
        late_batches = sorted({r[0] for ops in by_op.values() for r in ops if r[1]})
        seen = sum(r[1] or 0 for r in rows)
        share = dropped / seen if seen else 0.0
        if not by_op:
            return [ctx.finding(self, OK, f"no stateful operator in {pr.batches(rows)}")]
        text = (
            f"{dropped:,} rows dropped by the watermark in {len(late_batches)} of {len(rows)} "
            f"{pr.batches(rows)} ({share:.1%} of {seen:,} input rows)"
            + (f"; by operator: {', '.join(worst)}" if worst else "")
            + f" (WARN from {cfg.warn_rows:,} rows"
            + (f", ERR from {cfg.err_share:.0%} of input)" if cfg.err_share > 0 else ")")
        )
        if cfg.err_share > 0 and dropped >= cfg.warn_rows and share >= cfg.err_share:
            return [ctx.finding(self, ERR, text, self.hint)]
        if dropped >= cfg.warn_rows and dropped > 0:
            return [ctx.finding(self, WARN, text, self.hint)]
        return [ctx.finding(self, OK, text)]
