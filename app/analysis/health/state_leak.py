"""State leak: keys Spark should already have evicted, and state it can never evict.

Built on the eviction audit (``eviction_rules`` / ``eviction_audit``, written by every scan:
``collectors/scan/eviction_audit.py``). Three verdicts per operator:

* a store that can never be evicted (no watermark, the event-time column not in the key, a
  join side without a watermark): WARN once per operator, with the cause and the fix;
* overdue keys at the newest audited version (keys matching Spark's eviction predicate at
  the watermark of the batch that wrote it): WARN, naming how many and where;
* a join side evicted by a time bound: WARN when not one value was ever removed although the
  watermark has passed the oldest value by more than the store's retained range at
  ``min_versions`` versions (a join condition without a time range on the event times).
  The time bound is not in the checkpoint, and until Spark first evicts, a healthy join with
  a wide bound looks exactly like one without: being behind the watermark is not yet
  evidence. The retained range is how far behind the watermark the oldest value already was
  when it first fell behind; only versions where the oldest value is further behind than
  that count.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from stateglass.app.analysis.health.base import ERR, OK, WARN, Context, Finding, Store
from stateglass.collectors.scan.eviction_rules import JOIN_VALUE, NEVER, NOT_AUDITED
from stateglass.parsers.units import fmt_ms


def _ms(ms: int | None) -> str:
    if ms is None:
        return "?"
    try:
        return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):  # beyond datetime's years 1..9999
        return f"{ms} ms since the epoch"


class StateLeak:
    id = "state_leak"
    title = "State leak"
    hint_overdue = (
        "Spark removes these keys in the batch that writes the version, so they should not be "
        "there: a query in complete output mode never evicts (use update or append), a "
        "restart with a changed watermark column or delay leaves old keys behind, and a "
        "watermark column that is not the one the state is keyed by never matches. Browse "
        "the store with the 'overdue' filter to see them."
    )
    hint_join = (
        "Spark evicts join state by a state watermark derived from a time range on both "
        "event times in the join condition; without one, no value is ever removed. Add e.g. "
        "l.ts BETWEEN r.ts - INTERVAL 10 MINUTES AND r.ts + INTERVAL 10 MINUTES."
    )

    def check(self, ctx: Context) -> list[Finding]:
        rules = ctx.rows(
            "SELECT operator_id, store_name, state_var, operator_name, kind, audited, "
            "predicate, cause, fix FROM eviction_rules WHERE checkpoint = ? "
            "ORDER BY operator_id, store_name, state_var"
        )
        out: list[Finding] = []
        oks: list[str] = []
        never: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
        unbounded: dict[int, list[tuple[Store, str]]] = defaultdict(list)
        for rule in rules:
            op, store_name, state_var, op_name, kind, audited, predicate = rule[:7]
            store = Store(op, store_name, op_name, None, None)
            label = f"{op}/{store_name}" + (f"/{state_var}" if state_var else "")
            if kind == NEVER:
                never[op].append(rule)
            elif audited:
                finding, ok = self._audited(ctx, store, state_var, label, predicate)
                if finding:
                    out.append(finding)
                if ok:
                    oks.append(ok)
            elif kind == NOT_AUDITED:
                # Not judged, and said so: an OK that looked like "nothing to evict" would lie.
                oks.append(f"{label} not audited: {rule[7]}")
            elif kind == JOIN_VALUE:
                text, ok = self._join(ctx, store, label)
                if text:
                    unbounded[op].append((store, text))
                if ok:
                    oks.append(ok)
        for op, found in never.items():
            causes = list(dict.fromkeys(r[7] for r in found if r[7]))
            fixes = list(dict.fromkeys(r[8] for r in found if r[8]))
            stores = ", ".join(r[1] for r in found)
            store = Store(op, found[0][1], found[0][3], None, None)
            out.append(
                ctx.finding(
                    self,
                    WARN,
                    f"operator {op} ({found[0][3]}, {stores}) can never be evicted: "
                    + "; ".join(causes),
                    "; ".join(fixes),
                    store,
                )
            )
        for sides in unbounded.values():
            text = (
                "; ".join(t for _, t in sides) + ": the join has no time bound on its event times"
            )
            out.append(ctx.finding(self, WARN, text, self.hint_join, sides[0][0]))
        if not out:
            text = "; ".join(oks) if oks else "no operator evicts by event time"
            out.append(ctx.finding(self, OK, text))
        return out

    def _audited(
        self, ctx: Context, store: Store, state_var: str, label: str, predicate: str
    ) -> tuple[Finding | None, str | None]:
        rows = ctx.rows(
            "SELECT version, sum(overdue_keys), count(overdue_keys), count(*), "
            "max(watermark_ms), list(partition_id ORDER BY partition_id) "
            "FILTER (WHERE overdue_keys > 0) "
            "FROM eviction_audit WHERE checkpoint = ? AND operator_id = ? AND store_name = ? "
            "AND state_var = ? GROUP BY version ORDER BY version",
            [store.operator_id, store.store_name, state_var],
        )
        judged = [r for r in rows if r[2]]
        if not judged:
            return None, f"{label}: no audited version yet"
        c = ctx.config.state_leak
        newest = judged[-1]
        bad = [r for r in judged if (r[1] or 0) > 0]
        span = f"versions {judged[0][0]}..{newest[0]}"
        if (newest[1] or 0) >= max(c.warn_keys, 1):
            status = ERR if c.err_keys and newest[1] >= c.err_keys else WARN
            parts = ",".join(str(p) for p in (newest[5] or []))
            text = (
                f"{newest[1]:,} overdue key(s) in {label} at version {newest[0]} "
                f"(partitions {parts}; {predicate}, watermark {_ms(newest[4])} UTC); "
                f"{len(bad)} of {len(judged)} audited versions have some"
            )
            return ctx.finding(self, status, text, self.hint_overdue, store), None
        earlier = f", but {len(bad)} earlier version(s) had some" if bad else ""
        return None, f"{label}: 0 overdue keys at {span} ({predicate}){earlier}"

    def _join(self, ctx: Context, store: Store, label: str) -> tuple[str | None, str | None]:
        """``(leak text, ok text)`` of one side's values (keyToNumValues: no audit rows)."""
        rows = ctx.rows(
            "SELECT version, min(oldest_event_ms), max(watermark_ms) FROM eviction_audit "
            "WHERE checkpoint = ? AND operator_id = ? AND store_name = ? GROUP BY version "
            "ORDER BY version",
            [store.operator_id, store.store_name],
        )
        removed = ctx.rows(
            # Per-store sums are kept for every version (partition rows may be rolled up).
            "SELECT coalesce(sum(keys_removed), 0) FROM store_versions WHERE checkpoint = ? "
            "AND operator_id = ? AND store_name = ?",
            [store.operator_id, store.store_name],
        )[0][0]
        if not rows:
            return None, None
        if removed:
            return None, f"{label}: {removed:,} values evicted by the join's time bound"
        c = ctx.config.state_leak
        bound_ms = c.join_max_bound_s * 1000
        lags = [r[2] - r[1] for r in rows if r[1] is not None and r[2]]
        evidence = [r for r in rows if r[1] is not None and r[2] and r[2] - r[1] > bound_ms]
        if len(evidence) >= max(c.min_versions, 1):
            last = evidence[-1]
            text = (
                f"{label}: no value ever removed in {len(rows)} versions, though the oldest "
                f"value ({_ms(last[1])} UTC) is behind the watermark ({_ms(last[2])} UTC) by "
                f"more than {fmt_ms(bound_ms)}, the widest time bound a join is taken to have "
                f"(state_leak.join_max_bound_s), at {len(evidence)} of them"
            )
            return text, None
        lag = f"; the watermark is {fmt_ms(max(lags))} past the oldest value" if lags else ""
        return None, (
            f"{label}: no value removed yet ({len(rows)} versions{lag}): a join whose time "
            f"bound is up to {fmt_ms(bound_ms)} has evicted nothing yet either"
        )
