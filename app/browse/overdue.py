"""Browse's "overdue" filter: example keys Spark should already have evicted at one version.

The predicate is the store's :class:`~collectors.scan.eviction_rules.EvictionRule` (Spark's own),
the watermark that of the batch that wrote the version (``batchWatermarkMs`` of
``offsets/<version − 1>``): the same as the collect-time audit, evaluated on demand.

Example::

    found = overdue_page(StateView("/data/cp"), version=12, limit=50)
    print(found.rule.predicate, found.watermark_ms, found.table.num_rows)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from stateglass.app.browse.table import flattener
from stateglass.collectors.checkpoints.state_views import StateView, open_source
from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.scan.eviction_audit import store_rules
from stateglass.collectors.scan.eviction_rules import (
    EVENT_TIMERS,
    NOT_AUDITED,
    TIMERS,
    EvictionRule,
)
from stateglass.parsers.units import utc_ms

EVENT_TIME_COLUMN = "overdue.event_time"


@dataclass(frozen=True)
class OverduePage:
    """What the filter found: the rule, the watermark, and up to ``limit`` overdue rows."""

    rule: EvictionRule
    watermark_ms: int | None
    table: pa.Table | None
    scanned: int
    found: int


def rule_for(view: StateView) -> EvictionRule:
    """The eviction rule of the store (or timers) a Browse view shows."""
    source = open_source(view)
    # Which field and predicate does not depend on whether a watermark was ever set (only the
    # wording of a never-evicted store does, and the filter has nothing to show for those).
    # A join side's rule needs its sibling store's schema: derive the operator's rules at once.
    siblings = [s for s in source.cp.stores() if s.operator_id == view.operator_id]
    rules = store_rules(source.cp, siblings, has_watermark=True)
    wanted = EVENT_TIMERS if view.read_timers else None
    for rule in rules:
        if rule.store_name == source.store.store_name and rule.state_var == wanted:
            return rule
    return EvictionRule(
        view.operator_id,
        view.store_name,
        source.store.operator_name,
        NOT_AUDITED,
        cause="this state variable is not evicted by event time",
    )


def overdue_page(
    view: StateView, version: int, partition: int | None = None, limit: int = 50
) -> OverduePage:
    """Overdue rows of ``view`` at ``version`` (the first ``limit``, partitions in order)."""
    source = open_source(view)
    rule = rule_for(view)
    try:
        watermark = source.cp.offsets(version - 1).batch_watermark_ms
    except CheckpointError:
        watermark = None
    if not rule.audited or watermark is None:
        return OverduePage(rule, watermark, None, 0, 0)
    codec = source.row_codec
    picked: list[tuple[int, Any]] = []
    times: list[str] = []
    scanned = found = 0
    partitions = source.partitions_for(version - 1) if partition is None else [partition]
    for p in partitions:
        with source.decoding(p):
            for key, value in source.load(p, version):
                for row in codec.rows(key, value):
                    scanned += 1
                    ts = (
                        rule.event_time(row, None)
                        if rule.kind == TIMERS
                        else rule.event_time(row[0], row[1])
                    )
                    if ts is None or not rule.is_overdue(ts, watermark):
                        continue
                    found += 1
                    if len(picked) < limit:
                        picked.append((p, row))
                        times.append(utc_ms(ts if rule.unit == "ms" else ts // 1000))
    table = flattener(tuple(codec.columns)).table(picked)
    table = table.append_column(EVENT_TIME_COLUMN, pa.array(times, type=pa.string()))
    return OverduePage(rule, watermark, table, scanned, found)
