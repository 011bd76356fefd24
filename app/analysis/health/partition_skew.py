"""Partition skew: one partition holds far more keys, or bytes, than the median one."""

from __future__ import annotations

import statistics

from stateglass.app.analysis.health.base import (
    ERR,
    OK,
    WARN,
    Context,
    Finding,
    fmt_ratio,
)
from stateglass.parsers.units import fmt_bytes


class PartitionSkew:
    id = "partition_skew"
    title = "Partition skew"
    hint = (
        "One partition does most of the work (a hot key, or few distinct keys): its task "
        "sets the batch time and its memory. Salt or split the hot key, pre-aggregate before "
        "the stateful operator, or key by something finer; more shuffle partitions do not split "
        "a single key."
    )

    def check(self, ctx: Context) -> list[Finding]:
        cfg = ctx.config.partition_skew
        out: list[Finding] = []
        oks: list[tuple[float, str]] = []
        for store in ctx.stores:
            # At the newest version where every partition is known (store_totals): a
            # partition missing there would make the median, and so the ratio, lie.
            # The version first, then its rows: one lookup each, no subquery per row.
            newest = ctx.rows(
                "SELECT max(version) FROM store_totals WHERE checkpoint = ? AND operator_id = ? "
                "AND store_name = ? AND complete",
                [store.operator_id, store.store_name],
            )[0][0]
            rows = ctx.rows(
                "SELECT partition_id, version, num_keys, replay_bytes FROM state_versions "
                "WHERE checkpoint = ? AND operator_id = ? AND store_name = ? AND version = ?",
                [store.operator_id, store.store_name, newest],
            )
            if len(rows) < 2:
                what = f"{len(rows)} partition" if rows else "no version has every partition"
                oks.append((0.0, f"{store.operator_id}/{store.store_name}: {what}"))
                continue
            worst: tuple[float, str, str] | None = None
            notes = []
            top_ratio = 0.0
            for label, col, minimum, fmt in (
                ("keys", 2, cfg.min_keys, lambda v: f"{int(v):,}"),
                ("bytes to load", 3, cfg.min_bytes, fmt_bytes),
            ):
                values = [(r[col], r[0]) for r in rows if r[col] is not None]
                if not values:
                    continue
                top, part = max(values)
                mid = statistics.median(v for v, _ in values)
                ratio = top / max(mid, 1)
                text = (
                    f"partition {part} has {fmt(top)} {label}, {fmt_ratio(ratio)} the median "
                    f"{fmt(mid)} of {len(values)} partitions"
                )
                notes.append(f"{label} max/median {fmt_ratio(ratio)}")
                top_ratio = max(top_ratio, ratio)
                if top < minimum:
                    continue  # too small to matter, and ratios of tiny numbers lie
                status = self._status(ratio, cfg.warn_ratio, cfg.err_ratio)
                if status != OK and (worst is None or ratio > worst[0]):
                    worst = (ratio, status, text)
            if worst is not None:
                ratio, status, text = worst
                limit = cfg.err_ratio if status == ERR else cfg.warn_ratio
                out.append(
                    ctx.finding(
                        self, status, f"{text} ({status} at {fmt_ratio(limit)})", self.hint, store
                    )
                )
            else:
                where = f"{store.operator_id}/{store.store_name}"
                oks.append((top_ratio, f"{where}: {', '.join(notes)}"))
        if not out:
            out.append(
                ctx.finding(
                    self,
                    OK,
                    (
                        f"{len(oks)} store(s), most skewed {max(oks)[1]}"
                        if oks
                        else "no state stores"
                    )
                    + f" (WARN at {fmt_ratio(cfg.warn_ratio)} once a partition has "
                    f"{cfg.min_keys:,} keys or {fmt_bytes(cfg.min_bytes)})",
                )
            )
        return out

    @staticmethod
    def _status(ratio: float, warn: float, err: float) -> str:
        if err > 0 and ratio >= err:
            return ERR
        if ratio >= warn:
            return WARN
        return OK
