"""Falling behind: batches processed more slowly than their input arrived."""

from __future__ import annotations

import statistics

from stateglass.app.analysis.health import progress_rows as pr
from stateglass.app.analysis.health.base import OK, WARN, Context, Finding


class FallingBehind:
    id = "falling_behind"
    title = "Falling behind"
    hint = (
        "The query processes rows more slowly than they arrive, so each batch is bigger and "
        "later than the last. Give it more cores or executors, cut per-batch work (state "
        "size, shuffle partitions, expensive sinks), or cap input per batch "
        "(maxOffsetsPerTrigger, maxFilesPerTrigger) if catching up later is acceptable."
    )

    def check(self, ctx: Context) -> list[Finding]:
        cfg = ctx.config.falling_behind
        if not pr.has_progress(ctx):
            return pr.not_judged(ctx, self)
        # Spark: input rate = rows / time since the previous trigger, processing rate = rows /
        # this batch's duration. Processing below input means the batch took longer than the
        # time its input took to arrive.
        rows = pr.recent(
            ctx,
            "p.batch_id, p.input_rows_per_second, p.processed_rows_per_second",
            cfg.window,
            "p.num_input_rows > 0 AND p.input_rows_per_second > 0 "
            "AND p.processed_rows_per_second IS NOT NULL",
        )
        if len(rows) < max(cfg.min_batches, 1):
            return [
                ctx.finding(
                    self,
                    OK,
                    f"{len(rows)} batches with input, too few to judge (need {cfg.min_batches})",
                )
            ]
        ratios = [r[2] / r[1] for r in rows]
        behind = sum(1 for x in ratios if x < cfg.headroom)
        share = behind / len(rows)
        text = (
            f"processed slower than the input arrived in {behind} of {len(rows)} "
            f"{pr.batches(rows)}; median processing/input rate {statistics.median(ratios):.2f}x, "
            f"newest {rows[-1][2]:,.0f} vs {rows[-1][1]:,.0f} rows/s (WARN at a share of "
            f"{cfg.warn_share:g} below {cfg.headroom:g}x)"
        )
        if share >= cfg.warn_share:
            return [ctx.finding(self, WARN, text, self.hint)]
        return [ctx.finding(self, OK, text)]
