"""Commit time growing: the state store's commit takes longer batch after batch."""

from __future__ import annotations

import statistics

from stateglass.app.analysis.health import progress_rows as pr
from stateglass.app.analysis.health.base import OK, WARN, Context, Finding
from stateglass.parsers.units import fmt_ms


class CommitTime:
    id = "commit_time"
    title = "Commit time growing"
    hint = (
        "Each batch spends longer committing its state (writing deltas or changelogs, RocksDB "
        "flush and checkpoint, uploads). It usually follows state growth: bound the state "
        "(watermark, TTL), enable RocksDB changelog checkpointing, and check the checkpoint "
        "store's latency."
    )

    def check(self, ctx: Context) -> list[Finding]:
        cfg = ctx.config.commit_time
        if not pr.has_progress(ctx):
            return pr.not_judged(ctx, self)
        by_op = pr.recent_state(
            ctx,
            "s.batch_id, s.commit_time_ms",
            cfg.window,
            f"s.commit_time_ms IS NOT NULL AND {pr.AFTER_WARM_UP}",
        )
        out: list[Finding] = []
        oks: list[str] = []
        for (index, name), rows in by_op.items():
            where = f"operator {index} {name}"
            if len(rows) < max(cfg.min_batches, 2):
                oks.append(f"{where}: {len(rows)} batches, too few (need {cfg.min_batches})")
                continue
            half = len(rows) // 2
            before = statistics.median(r[1] for r in rows[:half])
            after = statistics.median(r[1] for r in rows[-half:])
            text = (
                f"{where}: median commit {fmt_ms(after)} over the newest {half} "
                f"batches vs {fmt_ms(before)} over the {half} before "
                f"({pr.batches(rows)}; summed over partitions; WARN at {cfg.warn_factor:g}x "
                f"and at least {fmt_ms(cfg.min_ms)})"
            )
            if after >= cfg.min_ms and after >= cfg.warn_factor * max(before, 1):
                out.append(ctx.finding(self, WARN, text, self.hint))
            else:
                oks.append(text)
        if not out:
            text = "; ".join(oks) if oks else "no stateful operator in the progress events"
            out.append(ctx.finding(self, OK, text))
        return out
