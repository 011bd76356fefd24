"""The report's growth attribution and restart cost, per store.

Restart cost comes from the database's file facts. Growth attribution reads the state itself
(the last :data:`app.browse.growth.DEFAULT_WINDOW` versions, one partition at a time), so it
needs the checkpoint to be readable where the report is made; when it is not, the report
says why instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from stateglass.app import queries
from stateglass.app.analysis import restart_cost
from stateglass.app.browse.growth import GrowthAttribution, attribute_growth
from stateglass.app.errors import AppError
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_views import StateView, views_of
from stateglass.collectors.errors import BadConfig, CheckpointError, EngineError, StorageError
from stateglass.parsers.errors import ParseError
from stateglass.parsers.units import fmt_bytes


@dataclass(frozen=True)
class StoreForensics:
    growth: GrowthAttribution | None
    growth_note: str  # why growth attribution is missing ("" when it is there)
    restart_now: tuple[restart_cost.PartitionCost, ...]
    restart_alt: tuple[restart_cost.PartitionCost, ...]
    alt_label: str

    @property
    def now_frame(self) -> pd.DataFrame:
        return restart_cost.costs_frame(self.restart_now)

    @property
    def alt_frame(self) -> pd.DataFrame:
        return restart_cost.costs_frame(self.restart_alt)

    def restart_lines(self) -> list[tuple[str, str]]:
        """(label, text) pairs: the restart figures now and under the what-if."""
        out = []
        for label, costs in (("restart now", self.restart_now), (self.alt_label, self.restart_alt)):
            worst = restart_cost.slowest(costs)
            if worst is None:
                continue
            total = sum(c.bytes for c in costs)
            files = sum(c.files for c in costs)
            out.append(
                (
                    label,
                    f"{files:,} files, {fmt_bytes(total)} over all partitions; slowest "
                    f"partition {worst.partition}: {fmt_bytes(worst.bytes)} in {worst.files} "
                    f"files, {worst.replays} replays"
                    + (" (sizes partly estimated)" if any(c.estimated for c in costs) else ""),
                )
            )
        broken = [c for c in self.restart_now if c.missing]
        if broken:
            out.append(
                (
                    "restart blocked",
                    f"{len(broken)} partition(s) lack a delta or changelog a restart needs",
                )
            )
        return out


def _what_if(provider: str, changelog: bool, inferred: int | None) -> tuple[int, bool, str]:
    """The report's one what-if: the other changelog setting (RocksDB) or another M (HDFS)."""
    default = restart_cost.SPARK_DEFAULT_MIN_DELTAS
    if provider == "rocksdb":
        on = not changelog
        return (
            default,
            on,
            (
                f"what if: changelog checkpointing {'on' if on else 'off'}, "
                f"minDeltasForSnapshot {default}"
            ),
        )
    m = default if inferred != default else default // 2
    return m, False, f"what if: minDeltasForSnapshot {m}"


def _growth(
    checkpoint: str, operator_id: int, store_name: str
) -> tuple[GrowthAttribution | None, str]:
    try:
        cp = Checkpoint.open(checkpoint)
        views = views_of(cp.store(operator_id, store_name), cp.root)
        view: StateView = next((v for v in views if not v.read_timers), views[0])
        # A report is a process of its own: its partitions are rolled on every core.
        return attribute_growth(view, jobs=os.cpu_count() or 1), ""
    # ParseError too: a cell that does not decode must cost the section, not the report;
    # EngineError: a worker process that died (killed for want of memory, say).
    except (CheckpointError, BadConfig, StorageError, AppError, ParseError, EngineError) as exc:
        return None, f"growth attribution not available: {exc}"


def load_forensics(
    db: str, checkpoint: str, operator_id: int, store_name: str, provider: str
) -> StoreForensics:
    facts = queries.restart_facts(db, checkpoint, operator_id, store_name)
    live = queries.live_state_files(db, checkpoint, operator_id, store_name)
    changelog = bool(live["kind"].eq("changelog").any()) if not live.empty else False
    inferred = restart_cost.inferred_min_deltas(facts, provider, changelog)
    m, alt_changelog, label = _what_if(provider, changelog, inferred)
    now = restart_cost.current_cost(live, facts) if not facts.empty else []
    alt = restart_cost.what_if(facts, provider, m, alt_changelog) if not facts.empty else []
    growth, note = _growth(checkpoint, operator_id, store_name)
    return StoreForensics(growth, note, tuple(now), tuple(alt), label)
