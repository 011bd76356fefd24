"""Memory per key growing: each key of the state takes more memory batch after batch."""

from __future__ import annotations

import itertools

from stateglass.app.analysis.health import progress_rows as pr
from stateglass.app.analysis.health.base import OK, WARN, Context, Finding
from stateglass.app.analysis.rewrite_command import rocksdb_move_hint
from stateglass.parsers.units import fmt_bytes


class MemoryPerKey:
    id = "memory_per_key"
    title = "Memory per key growing"
    hint = (
        "The values held per key keep growing (lists or maps that are appended to and never "
        "trimmed, sessions that never close): memory and state files grow even at a constant "
        "key count. Bound the value (keep the newest N, aggregate instead of collecting), or "
        "expire it with a TTL (transformWithState)."
    )

    def check(self, ctx: Context) -> list[Finding]:
        cfg = ctx.config.memory_per_key
        if not pr.has_progress(ctx):
            return pr.not_judged(ctx, self)
        by_op = pr.recent_state(
            ctx,
            "s.batch_id, s.memory_used_bytes, s.num_rows_total, "
            "s.rocksdb_put_count IS NOT NULL OR s.rocksdb_files_copied IS NOT NULL",
            cfg.window,
            # Batches without input (no-data batches) report only part of the cached maps.
            f"s.memory_used_bytes > 0 AND s.num_rows_total > 0 AND p.num_input_rows > 0 "
            f"AND {pr.AFTER_WARM_UP}",
        )
        out: list[Finding] = []
        oks: list[str] = []
        for (index, name), rows in by_op.items():
            where = f"operator {index} {name}"
            if any(r[3] for r in rows):
                # RocksDB reports its memtables, block cache and pinned blocks: memory that
                # fills up with use, not memory held per key.
                oks.append(f"{where}: RocksDB, whose memoryUsedBytes is not per key, not judged")
                continue
            if len(rows) < max(cfg.min_batches, 2):
                oks.append(f"{where}: {len(rows)} batches, too few (need {cfg.min_batches})")
                continue
            per_key = [r[1] / r[2] for r in rows]
            steps = [b - a for a, b in itertools.pairwise(per_key)]
            grew = sum(1 for d in steps if d > 0)
            ratio = per_key[-1] / per_key[0]
            text = (
                f"{where}: {fmt_bytes(per_key[0])} -> {fmt_bytes(per_key[-1])} per key "
                f"({ratio:.1f}x) over {pr.batches(rows)}, grew in {grew} of {len(steps)} "
                f"steps; {rows[-1][2]:,} keys, {fmt_bytes(rows[-1][1])} "
                f"(WARN at {cfg.warn_factor:g}x, growing in {cfg.growth_share:.0%} of steps)"
            )
            if rows[-1][2] < cfg.min_keys:
                oks.append(text + f", not judged below {cfg.min_keys:,} keys")
            elif ratio >= cfg.warn_factor and grew >= cfg.growth_share * len(steps):
                # Not RocksDB (skipped above): the HDFS-backed provider holds it in memory.
                hint = f"{self.hint} {rocksdb_move_hint(ctx.checkpoint)}"
                out.append(ctx.finding(self, WARN, text, hint))
            else:
                oks.append(text)
        if not out:
            text = "; ".join(oks) if oks else "no stateful operator in the progress events"
            out.append(ctx.finding(self, OK, text))
        return out
