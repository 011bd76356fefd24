"""How much history the database keeps, and at what resolution: the ``[history]`` settings.

A month of one ordinary query (200 partitions, a batch every 10 s) is 52M partition rows. The
database keeps each partition's rows at full resolution for a recent window, and beyond it one
row per bucket of versions (min, max and last keys, summed changes and bytes, the worst replay)
for good. Totals over partitions are kept per version for good, and purged state files are
compacted into per-version sums, so nothing a page, rule or report shows is lost.
:meth:`stateglass.collectors.db.writer.Database.maintain` applies it; a writer calls it on its
own every ``maintain_every`` versions written, after the scan's own transaction.

Example (a ``--config`` file)::

    [history]
    full_resolution_days = 7     # partition rows kept as collected
    rollup_versions = 360        # versions per roll-up bucket beyond that (an hour at 10 s)
    maintain_every = 360         # versions a writer collects between two maintenances
    enabled = true               # false keeps every partition row for good
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stateglass.collectors.config_file import Section, Tables, refuse_unknown_keys
from stateglass.collectors.errors import BadConfig


@dataclass(frozen=True)
class HistorySettings:
    """Retention and roll-up settings; the defaults are on."""

    full_resolution_days: float = 7.0
    rollup_versions: int = 360
    maintain_every: int = 360
    enabled: bool = True

    def describe(self) -> str:
        """One line saying what is kept at what resolution (plain text)."""
        if not self.enabled:
            return "every partition row is kept at full resolution (retention is off)"
        return (
            f"partition rows at full resolution for the newest {self.full_resolution_days:g} "
            f"days; older ones as one min/max/last row per {self.rollup_versions} versions, "
            "for good; totals over partitions at every version, for good"
        )


_KEYS: dict[str, type] = {
    "full_resolution_days": float,
    "rollup_versions": int,
    "maintain_every": int,
    "enabled": bool,
}


def from_config(data: Tables, shown: str) -> HistorySettings:
    """The ``[history]`` table of a config file (defaults without one)."""
    table: Mapping[str, Any] = data.get("history", {})
    refuse_unknown_keys(shown, "history", table, tuple(_KEYS))
    values: dict[str, Any] = {}
    for key, value in table.items():
        kind = _KEYS[key]
        # TOML's bool is an int to Python: check it apart, and take an int where a float goes.
        ok = (
            isinstance(value, bool)
            if kind is bool
            else (
                not isinstance(value, bool)
                and isinstance(value, (int, float) if kind is float else int)
            )
        )
        if not ok or (kind is not bool and value <= 0):
            raise BadConfig(shown, f"[history] {key} must be a positive {kind.__name__}")
        values[key] = kind(value)
    return HistorySettings(**values)


# The ``[history]`` section of a ``--config`` file (collectors/config_file.py).
SECTION = Section(("history",), from_config)
