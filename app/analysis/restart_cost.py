"""Restart cost: what a restart loads per partition, now and under other snapshot settings.

Pure: frames of the history database in, figures out (``stateglass.app.queries.restart_facts`` reads
them). Spark's rules, from ``apache/spark`` (docs/state_forensics.md has the pointers):

* **Loading version V** (:mod:`stateglass.collectors.checkpoints.load_rule`). HDFS
  (``HDFSBackedStateStoreProvider.loadMap``): the newest ``N.snapshot`` at or below V, then
  every ``N.delta`` after it up to V; no snapshot means deltas from version 1. RocksDB
  (``RocksDB.load``): the newest ``N.zip`` at or below V and every SST file its metadata
  lists, then, with changelog checkpointing, every ``N.changelog`` after it. Without
  changelog checkpointing every version has a zip: nothing is replayed. A snapshot Spark
  cannot read is skipped for an older one, bridged by more deltas or changelogs (automatic
  snapshot repair, Spark 4.1+).
* **When snapshots appear.** HDFS: the maintenance task (every
  ``stateStore.maintenanceInterval``, 60 s) writes a snapshot of the newest version when more
  than ``minDeltasForSnapshot`` deltas follow the last snapshot (``doSnapshot``). RocksDB
  with changelog checkpointing: a commit makes a snapshot when ``version − lastSnapshot ≥
  minDeltasForSnapshot`` (``shouldCreateSnapshot``), uploaded by maintenance.

The *what if* applies those rules to the same version history as if maintenance ran after
every batch and the query never restarted: HDFS snapshots at multiples of M + 1, RocksDB
changelog snapshots at multiples of M (counted from version 1 instead when the first commit
wrote a snapshot, as transformWithState's does). Sizes come from the files where they exist (a
snapshot or zip at that version, the deltas or changelogs written); a file that would exist
only under the other setting is *estimated* from the partition's keys at that version times
its bytes per key in the snapshots it does have (changelogs: changed keys times bytes per
key), and flagged so.

Example::

    costs = current_cost(facts)
    alt = what_if(facts, provider="hdfs", min_deltas=4, changelog=False)
    print(slowest(costs), slowest(alt))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from stateglass.collectors.checkpoints.load_rule import RepairSettings, load_start
from stateglass.collectors.stores import CHANGE_KINDS, FULL_KINDS
from stateglass.parsers.units import number

if TYPE_CHECKING:
    # pandas costs most of a second to import; rewrite and the CLI plan without it.
    import pandas as pd

SPARK_DEFAULT_MIN_DELTAS = 10


@dataclass(frozen=True)
class PartitionCost:
    """What restoring one partition at ``version`` reads."""

    partition: int
    version: int
    base_version: int  # the snapshot/zip loaded (0: none, every delta from version 1)
    replays: int  # deltas or changelogs applied after it
    files: int  # snapshot or zip + its SSTs + deltas or changelogs
    snapshot_bytes: int  # snapshot, or zip plus its SSTs
    replay_bytes: int  # the deltas or changelogs
    missing: tuple[int, ...] = ()  # versions whose delta/changelog a restart needs but lacks
    estimated: bool = False  # some size is an estimate (a file that does not exist)

    @property
    def bytes(self) -> int:
        return self.snapshot_bytes + self.replay_bytes


def _int(value: object) -> int | None:
    f = number(value)
    return None if f is None else int(f)


def _files_by_partition(
    live: pd.DataFrame,
) -> tuple[dict[int, list[tuple[int, str, float]]], dict[int, set[int]]]:
    """``live``'s files with a version, per partition: (version, kind, size_bytes) each;
    and the snapshot versions Spark cannot open, per partition."""
    versioned = live.dropna(subset=["version"])
    unreadable = (
        versioned["unreadable"].tolist()
        if "unreadable" in versioned.columns
        else [False] * len(versioned)
    )
    out: dict[int, list[tuple[int, str, float]]] = {}
    bad: dict[int, set[int]] = {}
    for part, version, kind, size, broken in zip(
        versioned["partition_id"].tolist(),
        versioned["version"].tolist(),
        versioned["kind"].tolist(),
        versioned["size_bytes"].tolist(),
        unreadable,
        strict=True,
    ):
        out.setdefault(int(part), []).append((int(version), str(kind), size))
        if broken:
            bad.setdefault(int(part), set()).add(int(version))
    return out, bad


def _total(sizes: Sequence[float]) -> int:
    """Sum of sizes, a missing one counting nothing (as pandas' ``sum``)."""
    return int(sum(s for s in sizes if s is not None and s == s))


def current_cost(
    live: pd.DataFrame, facts: pd.DataFrame, repair: RepairSettings | None = None
) -> list[PartitionCost]:
    """Per partition at its newest version, from the files on disk now (not purged).

    ``live``: partition_id, version, kind, size_bytes (``state_files``, not purged; SSTs
    have no version) and, optionally, ``unreadable`` (a snapshot Spark cannot open).
    ``facts``: ``state_versions`` rows (partition_id, version, sst_files_live,
    sst_bytes_live, …): a zip's SSTs are counted from what its metadata listed when it was
    collected. ``repair``: Spark's automatic snapshot repair (default: Spark's defaults).
    """
    repair = repair if repair is not None else RepairSettings()
    # Plain lists per partition: a month's store is 200 partitions × 300 versions, and
    # filtering a frame per partition cost half a CPU second there.
    by_partition, unreadable = _files_by_partition(live)
    newest_of = facts.groupby("partition_id")["version"].max()
    # Only the versions that listed SSTs: a row without either count reads as no SSTs, as a
    # missing row does (an HDFS store has none, and a month's window is 60,000 rows).
    listed = facts[facts["sst_files_live"].notna() | facts["sst_bytes_live"].notna()]
    ssts = {
        (int(p), int(v)): (f, b)
        for p, v, f, b in zip(
            listed["partition_id"].tolist(),
            listed["version"].tolist(),
            listed["sst_files_live"].tolist(),
            listed["sst_bytes_live"].tolist(),
            strict=True,
        )
    }
    out = []
    for partition, top in newest_of.items():
        part = int(partition)
        files = by_partition.get(part, [])
        # A version whose snapshot cannot be read may have no facts: its files still count.
        newest = max([int(top), *(f[0] for f in files)])
        full = [f for f in files if f[1] in FULL_KINDS and f[0] <= newest]
        kinds = {f[1] for f in files}
        runs = repair.on(bool(kinds & {"zip", "changelog"}), "changelog" in kinds)
        base = load_start(
            newest, sorted({f[0] for f in full}), unreadable.get(part, set()), runs
        ).snapshot
        base_files = [f for f in full if f[0] == base]
        snapshot_bytes = _total([f[2] for f in base_files])
        file_count = len(base_files)
        if base and any(f[1] == "zip" for f in base_files):
            sst_files, sst_bytes = ssts.get((part, base), (None, None))
            file_count += _int(sst_files) or 0
            snapshot_bytes += _int(sst_bytes) or 0
        changes = [f for f in files if f[1] in CHANGE_KINDS and base < f[0] <= newest]
        replayed = {f[0] for f in changes}
        # RocksDB without changelog checkpointing loads its zip at V: nothing to replay.
        needed = range(base + 1, newest + 1) if base != newest else range(0)
        missing = tuple(v for v in needed if v not in replayed)
        out.append(
            PartitionCost(
                partition=part,
                version=newest,
                base_version=base,
                replays=len(replayed),
                files=file_count + len(changes),
                snapshot_bytes=snapshot_bytes,
                replay_bytes=_total([f[2] for f in changes]),
                missing=missing if any(f[1] in CHANGE_KINDS for f in files) else (),
            )
        )
    return out


def snapshot_versions(
    provider: str, min_deltas: int, changelog: bool, newest: int, first: int = 0
) -> int:
    """The newest snapshot version at or below ``newest`` under Spark's rule (0: none).

    ``first``: the version Spark's count starts from, 1 when the store's first commit wrote a
    snapshot (RocksDB forces one there for some operators, transformWithState's among them),
    else 0. Spark counts versions since the last snapshot, so that snapshot sets the phase
    of every later one.
    """
    if provider == "rocksdb" and not changelog:
        return newest
    period = min_deltas + 1 if provider != "rocksdb" else max(1, min_deltas)
    if newest < first:
        return 0
    return newest - (newest - first) % period


def _per_key(sizes: pd.Series, keys: pd.Series) -> float | None:
    ok = keys.fillna(0) > 0
    ratios = (sizes[ok].astype("float64") / keys[ok].astype("float64")).dropna()
    return float(ratios.median()) if not ratios.empty else None


_FACT_COLUMNS = (
    "version",
    "num_keys",
    "keys_added",
    "keys_updated",
    "keys_removed",
    "delta_bytes",
    "snapshot_bytes",
    "sst_bytes_live",
    "sst_files_live",
)


def _np_per_key(sizes: np.ndarray, keys: np.ndarray) -> float | None:
    """:func:`_per_key` on float arrays (NaN for null): the same median, without a Series."""
    ok = keys > 0  # NaN compares false, as a null filled with 0
    ratios = sizes[ok] / keys[ok]
    ratios = ratios[~np.isnan(ratios)]
    return float(np.nanmedian(ratios)) if ratios.size else None


def _np_delta_per_key(cols: dict[str, np.ndarray]) -> float | None:
    """:func:`_delta_per_key` on float arrays."""
    changed = np.vstack([cols["keys_added"], cols["keys_updated"], cols["keys_removed"]])
    known = ~np.isnan(changed).all(axis=0)
    total = np.where(known, np.nansum(changed, axis=0), np.nan)
    return _np_per_key(cols["delta_bytes"], total)


def what_if(
    facts: pd.DataFrame, provider: str, min_deltas: int, changelog: bool
) -> list[PartitionCost]:
    """Per partition at its newest version, under ``min_deltas`` (and changelog on or off).

    ``facts``: ``state_versions`` rows (history included: purged files keep their sizes).
    """
    min_deltas = max(0, int(min_deltas))
    full_bytes = facts["snapshot_bytes"].astype("float64") + facts["sst_bytes_live"].astype(
        "float64"
    ).fillna(0)
    store_per_key = _per_key(full_bytes, facts["num_keys"]) or _delta_per_key(facts)
    # Float arrays per partition, sorted by version: indexing a frame per version of each
    # partition cost over half a CPU second on a month's store (200 × 300 versions).
    data = {c: facts[c].to_numpy(dtype="float64", na_value=np.nan) for c in _FACT_COLUMNS}
    parts = facts["partition_id"].to_numpy()
    order = np.lexsort((data["version"], parts))
    ids, starts = np.unique(parts[order], return_index=True)
    out = []
    for partition, rows in zip(ids, np.split(order, starts[1:]), strict=True):
        cols = {c: values[rows] for c, values in data.items()}
        out.append(
            _what_if_partition(int(partition), cols, provider, min_deltas, changelog, store_per_key)
        )
    return out


def _what_if_partition(
    partition: int,
    cols: dict[str, np.ndarray],
    provider: str,
    min_deltas: int,
    changelog: bool,
    store_per_key: float | None,
) -> PartitionCost:
    """One partition of :func:`what_if`: ``cols`` are its facts' columns, by version."""
    newest = int(cols["version"].max())
    at = {int(v): i for i, v in enumerate(cols["version"].tolist())}
    # A snapshot beside version 1's changelog is the first commit's, made whatever the
    # setting (a store without changelogs has a zip at every version: that says nothing).
    forced = (
        1 in at
        and not np.isnan(cols["snapshot_bytes"][at[1]])
        and not np.isnan(cols["delta_bytes"][at[1]])
    )
    base = snapshot_versions(provider, min_deltas, changelog, newest, first=1 if forced else 0)
    rows = {c: values.tolist() for c, values in cols.items()}
    estimated = False
    snapshot_bytes, files = 0, 0
    part_full = cols["snapshot_bytes"] + np.nan_to_num(cols["sst_bytes_live"], nan=0.0)
    per_key = (
        _np_per_key(part_full, cols["num_keys"]) or _np_delta_per_key(cols) or store_per_key or 0.0
    )
    if base:
        i = at.get(base)
        real = None if i is None else _int(rows["snapshot_bytes"][i])
        if real is not None and i is not None:
            ssts = _int(rows["sst_files_live"][i])
            snapshot_bytes = real + (_int(rows["sst_bytes_live"][i]) or 0)
            files = 1 + (ssts or 0)
        else:
            keys = 0 if i is None else (_int(rows["num_keys"][i]) or 0)
            snapshot_bytes = round(keys * per_key)
            counts = cols["sst_files_live"][~np.isnan(cols["sst_files_live"])]
            files = 1 + (int(np.nanmedian(counts)) if counts.size else 0)
            estimated = True
    replay_bytes = 0
    for v in range(base + 1, newest + 1):
        i = at.get(v)
        real = None if i is None else _int(rows["delta_bytes"][i])
        if real is not None:
            replay_bytes += real
            continue
        estimated = True
        if i is not None:
            changed = sum(
                _int(rows[c][i]) or 0 for c in ("keys_added", "keys_updated", "keys_removed")
            )
            replay_bytes += round(changed * per_key)
    replays = newest - base
    return PartitionCost(
        partition=partition,
        version=newest,
        base_version=base,
        replays=replays,
        files=files + replays,
        snapshot_bytes=snapshot_bytes,
        replay_bytes=replay_bytes,
        estimated=estimated,
    )


def _delta_per_key(facts: pd.DataFrame) -> float | None:
    """Bytes per record of the deltas or changelogs: a store that never wrote a snapshot
    (each record holds a key and its value, as a snapshot row does)."""
    changed = (
        facts[["keys_added", "keys_updated", "keys_removed"]]
        .astype("float64")
        .sum(axis=1, min_count=1)
    )
    return _per_key(facts["delta_bytes"], changed)


def inferred_min_deltas(facts: pd.DataFrame, provider: str, changelog: bool) -> int | None:
    """The ``minDeltasForSnapshot`` the snapshot spacing on disk suggests (None: no sign).

    The most common gap between consecutive snapshots of a partition: M + 1 for HDFS, M
    for RocksDB changelogs. Slow maintenance only widens gaps, so this is an upper bound.
    """
    if provider == "rocksdb" and not changelog:
        return None
    gaps: list[int] = []
    for _, part in facts.dropna(subset=["snapshot_bytes"]).groupby("partition_id"):
        vs = sorted(int(v) for v in part["version"])
        gaps += [b - a for a, b in pairwise(vs)]
    if not gaps:
        return None
    # The most common gap; of several as common, the smallest.
    counts = Counter(gaps)
    most = max(counts.values())
    gap = min(g for g, n in counts.items() if n == most)
    return int(gap) - (1 if provider != "rocksdb" else 0)


def slowest(costs: Sequence[PartitionCost]) -> PartitionCost | None:
    """The partition a restart waits for: most bytes, then most replays."""
    return max(costs, key=lambda c: (c.bytes, c.replays, -c.partition), default=None)


def costs_frame(costs: Sequence[PartitionCost]) -> pd.DataFrame:
    """One row per partition, for tables and figures."""
    import pandas as pd

    return pd.DataFrame(
        {
            "partition_id": [c.partition for c in costs],
            "version": [c.version for c in costs],
            "base_version": [c.base_version for c in costs],
            "replays": [c.replays for c in costs],
            "files": [c.files for c in costs],
            "snapshot_bytes": [c.snapshot_bytes for c in costs],
            "replay_bytes": [c.replay_bytes for c in costs],
            "bytes": [c.bytes for c in costs],
            "missing": [len(c.missing) for c in costs],
            "estimated": [c.estimated for c in costs],
        }
    )


ASSUMPTIONS = (
    "The what-if applies Spark's snapshot rule to the versions on record as if maintenance "
    "ran after every batch and the query never restarted (HDFS: a snapshot once more than "
    "minDeltasForSnapshot deltas follow the last; RocksDB with changelog checkpointing: "
    "every minDeltasForSnapshot versions). Real snapshots come later when batches are "
    "faster than spark.sql.streaming.stateStore.maintenanceInterval (60 s). Sizes of files "
    "that exist only under the other setting are estimated from keys × bytes per key (from "
    "the snapshots on record, else from the deltas or changelogs)."
)
