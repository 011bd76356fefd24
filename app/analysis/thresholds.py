"""Thresholds of the health rules: documented defaults, overridable from a TOML file.

Every field below is a key of the ``--config`` file, under the section named after its rule
(``docs/health.md`` lists them with what they mean); the decompression limits (``[limits]``,
``docs/limits.md``) are set from the same file. Unknown keys, and values of the wrong type or
sign, are a one-line :class:`~collectors.errors.BadConfig` naming the file: a typo must not
silently fall back to a default. Apart from the rules' package, so that reading a
``--config`` file (:mod:`stateglass.app.settings`, which every command does) does not load the
rules and DuckDB.

Example::

    # health.toml
    [spark]
    min_deltas_for_snapshot = 50     # what the cluster runs with; Spark does not pin it

    [stalled_query]
    enabled = false                  # a scheduled availableNow job: long gaps are normal

    config = load_settings("health.toml").health     # stateglass.app.settings
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

from stateglass.collectors.config_file import Section, Tables, refuse_unknown_keys
from stateglass.collectors.errors import BadConfig
from stateglass.parsers.limits import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_RATIO,
    DEFAULT_MIN_BYTES,
    DecodeLimits,
)


@dataclass(frozen=True)
class SparkConfig:
    """Spark confs the rules compare with; Spark does not pin them in ``offsets/N``, so they are
    taken from the checkpoint's pinned conf when present, else from here (Spark's defaults)."""

    min_deltas_for_snapshot: int = 10
    min_batches_to_retain: int = 100
    # spark.sql.streaming.stateStore.autoSnapshotRepair.enabled (Spark 4.1+, on by default):
    # a snapshot that fails to load is skipped for an older one plus more deltas/changelogs.
    # Set it false for a cluster on Spark 4.0 or older, or with the conf off.
    auto_snapshot_repair: bool = True
    # spark.sql.streaming.stateStore.autoSnapshotRepair.maxChangeFileReplay (500 in 4.3)
    max_change_file_replay: int = 500


@dataclass(frozen=True)
class StalledQueryConfig:
    enabled: bool = True
    # WARN when no commit for more than warn_factor × the median trigger interval …
    warn_factor: float = 10.0
    # … and ERR beyond err_factor × (0: never ERR; a stopped query looks exactly the same).
    err_factor: float = 0.0
    # Gaps shorter than this are never flagged, whatever the median.
    min_seconds: float = 300.0
    # Batches the median is taken over (the newest ones).
    window: int = 50


@dataclass(frozen=True)
class StuckBatchConfig:
    enabled: bool = True
    # An uncommitted batch older than max(factor × median batch duration, min seconds).
    warn_factor: float = 10.0
    warn_min_seconds: float = 300.0
    err_factor: float = 60.0
    err_min_seconds: float = 3600.0
    window: int = 50


@dataclass(frozen=True)
class UnboundedStateConfig:
    enabled: bool = True
    # The newest versions looked at, and the fewest needed to judge.
    window: int = 10
    min_versions: int = 5
    # Share of version-to-version steps in the window where the key count grew.
    growth_share: float = 0.8
    # Keys removed / keys added over the window at or below which removals count as "few".
    max_removed_ratio: float = 0.05
    # Stores with fewer keys (summed over partitions) at the newest version are not judged.
    min_keys: int = 1000


@dataclass(frozen=True)
class PartitionSkewConfig:
    enabled: bool = True
    # max / median across partitions, of keys or of replay bytes, at the newest version.
    warn_ratio: float = 4.0
    err_ratio: float = 0.0  # 0: never ERR (skew costs time, not correctness)
    # Stores smaller than this (largest partition) are not judged: ratios of tiny numbers lie.
    min_keys: int = 1000
    min_bytes: int = 1 << 20


@dataclass(frozen=True)
class SnapshotLagConfig:
    enabled: bool = True
    # Versions since the last snapshot above factor × minDeltasForSnapshot.
    warn_factor: float = 2.0
    err_factor: float = 10.0
    # … and the newest snapshot older than this, measured against the latest version's file:
    # maintenance runs every maintenanceInterval (60s), so fast triggers pile up versions.
    min_seconds: float = 300.0


@dataclass(frozen=True)
class RetentionConfig:
    enabled: bool = True


@dataclass(frozen=True)
class HolesConfig:
    enabled: bool = True


@dataclass(frozen=True)
class DamagedFilesConfig:
    enabled: bool = True


@dataclass(frozen=True)
class OrphansConfig:
    enabled: bool = True
    # Temporary files and unreferenced SSTs younger than this may belong to a running batch.
    min_age_seconds: float = 600.0


@dataclass(frozen=True)
class SchemaDriftConfig:
    enabled: bool = True


# ---- rules on Spark's progress events ----


@dataclass(frozen=True)
class FallingBehindConfig:
    enabled: bool = True
    # The newest batches with input looked at, and the fewest needed to judge.
    window: int = 10
    min_batches: int = 5
    # A batch is behind when processedRowsPerSecond < headroom × inputRowsPerSecond …
    headroom: float = 1.0
    # … and the query is when at least this share of the window is.
    warn_share: float = 0.8


@dataclass(frozen=True)
class LateRowsConfig:
    enabled: bool = True
    # The newest batches looked at.
    window: int = 10
    # WARN from this many rows dropped by the watermark over the window.
    warn_rows: int = 1
    # ERR when dropped rows reach this share of the window's input rows (0: never ERR).
    err_share: float = 0.0


@dataclass(frozen=True)
class CommitTimeConfig:
    enabled: bool = True
    window: int = 10
    min_batches: int = 6
    # WARN when the median commit time of the newest half of the window is at least
    # warn_factor × the older half's …
    warn_factor: float = 2.0
    # … and at least this long (summed over partitions, as Spark reports it).
    min_ms: int = 1000


@dataclass(frozen=True)
class MemoryPerKeyConfig:
    enabled: bool = True
    window: int = 10
    min_batches: int = 4
    # memoryUsedBytes / numRowsTotal at the newest batch over the oldest of the window …
    warn_factor: float = 2.0
    # … having grown in this share of the steps.
    growth_share: float = 0.8
    # Operators with fewer keys are not judged: per-key figures of tiny states lie.
    min_keys: int = 100


@dataclass(frozen=True)
class RocksdbStallsConfig:
    enabled: bool = True
    window: int = 10
    # rocksdbWriterStallLatencyMs summed over the window: WARN from warn_ms, ERR from err_ms
    # (0: never ERR).
    warn_ms: int = 1
    err_ms: int = 0


@dataclass(frozen=True)
class StateLeakConfig:
    """The eviction audit: keys Spark should already have evicted."""

    enabled: bool = True
    # WARN from this many overdue keys at the newest audited version; ERR from err_keys
    # (0: never ERR).
    warn_keys: int = 1
    err_keys: int = 0
    # A join side with a watermark but no removal: judged after this many versions whose
    # oldest value is behind the watermark by more than join_max_bound_s.
    min_versions: int = 3
    # The widest time bound a join is taken to have (the bound is in the query plan, not in
    # the checkpoint): until the watermark is this far past a side's oldest value, a side
    # that has removed nothing may be a healthy join early in its life.
    join_max_bound_s: float = 86_400.0


@dataclass(frozen=True)
class LimitsConfig:
    """Decompression limits (``docs/limits.md``); not a rule, but set from the same file."""

    max_ratio: int = DEFAULT_MAX_RATIO
    min_bytes: int = DEFAULT_MIN_BYTES
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES

    def over(self, base: DecodeLimits) -> DecodeLimits:
        """``base`` with every key this file sets to something other than its default."""
        defaults = LimitsConfig()
        changes = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) != getattr(defaults, f.name)
        }
        return dataclasses.replace(base, **changes)


@dataclass(frozen=True)
class RestartConfig:
    enabled: bool = True


@dataclass(frozen=True)
class HealthConfig:
    """Every threshold of every rule; the defaults are documented in ``docs/health.md``."""

    spark: SparkConfig = field(default_factory=SparkConfig)
    restart: RestartConfig = field(default_factory=RestartConfig)
    stalled_query: StalledQueryConfig = field(default_factory=StalledQueryConfig)
    stuck_batch: StuckBatchConfig = field(default_factory=StuckBatchConfig)
    unbounded_state: UnboundedStateConfig = field(default_factory=UnboundedStateConfig)
    partition_skew: PartitionSkewConfig = field(default_factory=PartitionSkewConfig)
    snapshot_lag: SnapshotLagConfig = field(default_factory=SnapshotLagConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    holes: HolesConfig = field(default_factory=HolesConfig)
    damaged_files: DamagedFilesConfig = field(default_factory=DamagedFilesConfig)
    orphans: OrphansConfig = field(default_factory=OrphansConfig)
    schema_drift: SchemaDriftConfig = field(default_factory=SchemaDriftConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    # ---- rules on Spark's progress events ----
    falling_behind: FallingBehindConfig = field(default_factory=FallingBehindConfig)
    late_rows: LateRowsConfig = field(default_factory=LateRowsConfig)
    commit_time: CommitTimeConfig = field(default_factory=CommitTimeConfig)
    memory_per_key: MemoryPerKeyConfig = field(default_factory=MemoryPerKeyConfig)
    rocksdb_stalls: RocksdbStallsConfig = field(default_factory=RocksdbStallsConfig)
    # ---- the eviction audit ----
    state_leak: StateLeakConfig = field(default_factory=StateLeakConfig)

    def enabled(self, rule: str) -> bool:
        section = getattr(self, rule, None)
        return bool(getattr(section, "enabled", True))


def _coerce(path: str, where: str, default: Any, value: Any) -> Any:
    """``value`` as the type of ``default``; bools are not numbers, numbers are never negative."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise BadConfig(path, f"{where} must be true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadConfig(path, f"{where} must be a number, got {value!r}")
    if isinstance(default, int) and not isinstance(value, int):
        raise BadConfig(path, f"{where} must be a whole number, got {value!r}")
    if value < 0:
        raise BadConfig(path, f"{where} must not be negative, got {value!r}")
    return float(value) if isinstance(default, float) else value


def from_config(data: Tables, path: str) -> HealthConfig:
    """A :class:`HealthConfig` from the rules' tables of a parsed TOML file; ``path`` names
    the file in errors."""
    base = HealthConfig()
    changes: dict[str, Any] = {}
    for name, table in data.items():
        current = getattr(base, name)
        keys = {f.name: getattr(current, f.name) for f in fields(current)}
        refuse_unknown_keys(path, name, table, tuple(keys))
        updates = {
            key: _coerce(path, f"[{name}] {key}", keys[key], value) for key, value in table.items()
        }
        changes[name] = dataclasses.replace(current, **updates)
    return dataclasses.replace(base, **changes)


# The rules' sections of a ``--config`` file, one per field of HealthConfig
# (collectors/config_file.py).
SECTION = Section(tuple(f.name for f in fields(HealthConfig)), from_config)
