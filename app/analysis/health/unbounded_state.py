"""Unbounded state: keys that keep growing with (almost) no removals, or a stuck watermark."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from stateglass.app.analysis.health.base import OK, WARN, Context, Finding, Store
from stateglass.collectors.checkpoints.checkpoint import TWS_OPERATORS
from stateglass.parsers.units import fmt_ms


def _unit(store: Store) -> str:
    """What a store's ``num_keys`` counts: a transformWithState store's are RocksDB keys of
    every column family, not the rows Spark's reader returns per state variable."""
    if store.operator_name in TWS_OPERATORS:
        return "raw RocksDB keys (every column family, timers and TTL indexes included)"
    return "keys"


def _ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


class UnboundedState:
    id = "unbounded_state"
    title = "Unbounded state"
    hint_growth = (
        "Nothing evicts these keys: add a watermark (withWatermark) on the event-time column "
        "the state is keyed or windowed by, use a TTL (transformWithState), or bound the key "
        "space. Without that the state grows until executors run out of memory or disk."
    )
    hint_watermark = (
        "The watermark has not moved, so no state is evicted: check that event times still "
        "advance in every source (with several watermarks Spark takes the minimum; an idle "
        "source holds it back) and that the watermark column is the right one."
    )

    def check(self, ctx: Context) -> list[Finding]:
        out: list[Finding] = []
        watermark = self._watermark(ctx)
        if watermark is not None:
            out.append(watermark)
        oks: list[tuple[int, str]] = []
        for store in ctx.stores:
            status, text, size = self._growth(ctx, store)
            if status == WARN:
                out.append(ctx.finding(self, WARN, text, self.hint_growth, store))
            else:
                oks.append((size, f"{store.operator_id}/{store.store_name} {text}"))
        if not out:
            # The largest store speaks for all: one line, whatever the number of stores.
            text = f"{len(oks)} store(s), largest: {max(oks)[1]}" if oks else "no state stores"
            out.append(ctx.finding(self, OK, text + self._watermark_note(ctx)))
        return out

    def _growth(self, ctx: Context, store: Store) -> tuple[str, str, int]:
        """``(status, text, keys now)`` of one store."""
        c = ctx.config.unbounded_state
        rows = ctx.rows(
            "SELECT version, num_keys, keys_added, keys_removed FROM state_growth "
            "WHERE checkpoint = ? AND operator_id = ? AND store_name = ? AND num_keys IS NOT NULL "
            "ORDER BY version DESC LIMIT ?",
            [store.operator_id, store.store_name, c.window],
        )[::-1]
        if len(rows) < max(c.min_versions, 2):
            size = rows[-1][1] if rows else 0
            return OK, f"{len(rows)} versions, too few to judge (need {c.min_versions})", size
        keys = [r[1] for r in rows]
        steps = [b - a for a, b in itertools.pairwise(keys)]
        grew = sum(1 for d in steps if d > 0)
        share = grew / len(steps)
        added = [r[2] for r in rows[1:] if r[2] is not None]
        removed = [r[3] for r in rows[1:] if r[3] is not None]
        first_v, last_v = rows[0][0], rows[-1][0]
        span = f"versions {first_v}..{last_v}"
        if removed:
            few_removals = sum(removed) <= c.max_removed_ratio * max(sum(added), 1)
            removals = f"{sum(removed):,} removed vs {sum(added):,} added"
        else:
            # Zips without changelogs: no per-key counts; a never-shrinking count says the same.
            few_removals = all(d >= 0 for d in steps)
            removals = "no removal counts (zips only)"
        text = (
            f"{_unit(store)} {keys[0]:,} -> {keys[-1]:,} over {span}, grew in {grew} of "
            f"{len(steps)} steps; {removals}"
        )
        if keys[-1] < c.min_keys:
            return OK, text + f" (not judged below {c.min_keys:,} keys)", keys[-1]
        if keys[-1] > keys[0] and share >= c.growth_share and few_removals:
            return WARN, text, keys[-1]
        return OK, text, keys[-1]

    def _watermark(self, ctx: Context) -> Finding | None:
        c = ctx.config.unbounded_state
        rows = ctx.rows(
            "SELECT batch_id, watermark_ms, batch_timestamp_ms FROM batches WHERE checkpoint = ? "
            "AND watermark_ms IS NOT NULL ORDER BY batch_id DESC LIMIT ?",
            [c.window],
        )[::-1]
        if not ctx.stores or len(rows) < max(c.min_versions, 2):
            return None
        marks = {r[1] for r in rows}
        if len(marks) != 1 or rows[-1][1] <= 0:
            return None  # moving, or no watermark at all (then growth tells)
        first, last = rows[0], rows[-1]
        if (last[2] or 0) <= (first[2] or 0):
            return None
        text = (
            f"watermark stuck at {_ms(last[1])} UTC for batches {first[0]}..{last[0]} "
            f"while processing time moved {fmt_ms(last[2] - first[2])}"
        )
        return ctx.finding(self, WARN, text, self.hint_watermark)

    def _watermark_note(self, ctx: Context) -> str:
        rows = ctx.rows(
            "SELECT max(watermark_ms) FROM batches WHERE checkpoint = ? AND watermark_ms > 0"
        )
        if not rows or rows[0][0] is None:
            return "; no watermark"
        return f"; watermark at {_ms(rows[0][0])} UTC"
