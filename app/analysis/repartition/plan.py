"""The repartition planner: what ``n`` partitions would hold, before Spark rewrites the state.

Reads every store of a checkpoint at one batch (the last committed by default, the one Spark's
repartition reads), sends each stored key where Spark's repartition would
(:mod:`stateglass.app.analysis.repartition.keys`) and adds up, per new partition:

* **keys**: stored keys, one per RocksDB entry. This is what Spark's state reader returns per
  ``partition_id`` for every store except list state (the reader gives one row per element
  unless ``flattenCollectionTypes`` is false).
* **bytes**: the stored key and value bytes (each RocksDB entry's key plus value, as Spark
  encodes them, column-family prefix and version byte included). The repartition re-encodes
  the same rows, so the new stores hold the same bytes; files on disk are those compressed,
  plus SST overhead.

From those it derives skew (max / median keys per store, as the ``partition_skew`` rule
computes it), the slowest partition's restart cost (:mod:`stateglass.app.analysis.restart_cost`:
right
after a repartition every partition restarts from the one snapshot the rewrite wrote, so its
cost is that snapshot; its size on disk is estimated from the store's current bytes on disk
per stored byte) and the time Spark's repartition takes (:data:`REWRITE_MODEL`, calibrated on
real repartitions; docs/benchmarks.md).

Example::

    plan = plan_partitions(Checkpoint.open("/data/cp/orders"), 8)
    for store in plan.stores:
        print(store.label, store.keys, store.skew)
"""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stateglass.app.analysis.errors import AnalysisError
from stateglass.app.analysis.repartition.keys import (
    Refused,
    no_schema,
    partition_key,
    partition_key_rule,
    shuffle_mismatch,
    unsupported_provider,
)
from stateglass.app.analysis.restart_cost import PartitionCost, slowest
from stateglass.app.analysis.thresholds import PartitionSkewConfig
from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import StateView, views_of
from stateglass.collectors.errors import NotFound
from stateglass.parsers.partitioning import row_partition

if TYPE_CHECKING:
    from stateglass.collectors.engines.forked import ForkedPool

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# A kept target for a key the hash does not cover (see plan_stores).
UNPLACED = 0xFFFFFFFF
INFERRED = " (inferred)"


@dataclass(frozen=True)
class RewriteModel:
    """Seconds Spark's repartition takes: ``overhead_s + stored bytes / bytes_per_s``.

    Fitted (least squares) to real repartitions timed by
    ``benchmarks/repartition_rewrite.py``; docs/benchmarks.md has the runs.
    """

    overhead_s: float
    bytes_per_s: float
    basis: str

    def seconds(self, stored_bytes: int) -> float:
        return self.overhead_s + stored_bytes / self.bytes_per_s


REWRITE_MODEL = RewriteModel(
    overhead_s=7.5,
    bytes_per_s=1.2e6,
    basis=(
        "a least-squares fit to 8 real Spark 4.3 repartitions (1k-300k keys, 0.06-17 MB "
        "of state, local[2]) timed 2026-11-24 on a shared 2-core machine at load 15-27; "
        "a cluster with more cores per partition is faster (docs/benchmarks.md)"
    ),
)


@dataclass(frozen=True)
class StorePlan:
    """One store (or column family, or state variable) before and after."""

    operator_id: int
    operator_name: str
    label: str  # store name, or store name / state variable
    rule: str  # which key columns Spark hashes
    keys: tuple[int, ...]  # per new partition
    bytes: tuple[int, ...]
    current_keys: tuple[int, ...]  # per current partition
    current_bytes: tuple[int, ...]
    unhashed: int = 0  # keys of a type the hash does not cover (none in practice)
    warning: str | None = None  # the planned layout does not follow the query's shuffle

    @property
    def skew(self) -> float | None:
        return skew(self.keys)

    @property
    def current_skew(self) -> float | None:
        return skew(self.current_keys)


@dataclass(frozen=True)
class Plan:
    """What ``partitions`` would look like, from the state of ``batch_id``."""

    checkpoint: str
    batch_id: int
    current_partitions: int
    partitions: int
    stores: tuple[StorePlan, ...]
    refusals: tuple[tuple[str, str], ...]  # (store label, Spark's reason)
    disk_per_stored_byte: float | None  # the store's bytes on disk per stored byte now
    current_restart: tuple[PartitionCost, ...] = field(default=())

    @property
    def keys(self) -> tuple[int, ...]:
        return _sum_columns([s.keys for s in self.stores], self.partitions)

    @property
    def bytes(self) -> tuple[int, ...]:
        return _sum_columns([s.bytes for s in self.stores], self.partitions)

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes)

    @property
    def restart(self) -> tuple[PartitionCost, ...]:
        """Each new partition loads the one snapshot the rewrite wrote: no replays."""
        ratio = self.disk_per_stored_byte or 1.0
        version = self.batch_id + 2
        return tuple(
            PartitionCost(
                partition=p,
                version=version,
                base_version=version,
                replays=0,
                files=len(self.stores),
                snapshot_bytes=round(b * ratio),
                replay_bytes=0,
                estimated=True,
            )
            for p, b in enumerate(self.bytes)
        )

    @property
    def slowest_restart(self) -> PartitionCost | None:
        return slowest(self.restart)

    @property
    def rewrite_seconds(self) -> float:
        return REWRITE_MODEL.seconds(self.total_bytes)


def skew(keys: Sequence[int]) -> float | None:
    """Max over median keys per partition, as the ``partition_skew`` rule computes it."""
    if len(keys) < 2:
        return None
    return max(keys) / max(statistics.median(keys), 1)


def skew_warns(keys: Sequence[int]) -> bool:
    """Whether the ``partition_skew`` rule's defaults would WARN on these keys."""
    cfg = PartitionSkewConfig()
    ratio = skew(keys)
    return ratio is not None and max(keys) >= cfg.min_keys and ratio >= cfg.warn_ratio


def _sum_columns(rows: Sequence[Sequence[int]], width: int) -> tuple[int, ...]:
    return tuple(sum(r[p] for r in rows) for p in range(width))


def current_partitions(cp: Checkpoint, batch_id: int) -> int:
    """The partition count of the state at ``batch_id``: ``spark.sql.shuffle.partitions`` in
    its offset log entry (Spark compares ``n`` with it), else the directories."""
    try:
        value = cp.offsets(batch_id).conf.get(SHUFFLE_PARTITIONS)
    except NotFound:
        value = None
    if value is not None and str(value).isdigit():
        return int(value)
    stores = cp.stores()
    return max((s.num_partitions for s in stores), default=0)


def check_request(cp: Checkpoint, partitions: int, batch_id: int) -> int:
    """Refuse what Spark refuses before reading any state; the current partition count."""
    if partitions < 1:
        raise AnalysisError(
            f"--partitions {partitions}: [STATE_REPARTITION_INVALID_PARAMETER."
            "IS_NOT_GREATER_THAN_ZERO] numPartitions must be greater than zero"
        )
    stores = cp.stores()
    if not stores:
        raise AnalysisError(
            f"{cp.root}: no state stores: a stateless query has nothing to repartition"
        )
    current = current_partitions(cp, batch_id)
    if partitions == current:
        raise AnalysisError(
            f"{cp.root}: batch {batch_id} already has {current} partitions: "
            "[STATE_REPARTITION_INVALID_CHECKPOINT.SHUFFLE_PARTITIONS_ALREADY_MATCH] "
            "Spark's repartition would be a no-op"
        )
    return current


def checkpoint_refusals(cp: Checkpoint) -> list[tuple[str, str]]:
    """What makes Spark refuse the whole checkpoint, whatever its operators. The plan is
    still made: ``stateglass rewrite`` sends keys where Spark's hash does, on any provider."""
    refusals: list[tuple[str, str]] = []
    if any(s.provider == "hdfs" for s in cp.stores()):
        refusals.append(("checkpoint", f"HDFS state store provider: {unsupported_provider()}"))
    offsets, commits = cp.offset_batch_ids, cp.commit_batch_ids
    if offsets and commits and offsets[-1] > commits[-1]:
        refusals.append(
            (
                "checkpoint",
                f"[STATE_REPARTITION_INVALID_CHECKPOINT.LAST_BATCH_FAILED] The last batch ID "
                f"{offsets[-1]} didn't finish successfully (offsets without a commit): let the "
                "query finish a batch, or pass enforceExactlyOnceSink=False to repartition",
            )
        )
    return refusals


def plan_partitions(
    cp: Checkpoint,
    partitions: int,
    batch_id: int | None = None,
    operator_id: int | None = None,
    store_name: str | None = None,
) -> Plan:
    """The plan for ``partitions`` from the state of ``batch_id`` (default: last committed)."""
    batch = cp.resolve_batch(batch_id)
    current = check_request(cp, partitions, batch)
    stores = [
        s
        for s in cp.stores()
        if (operator_id is None or s.operator_id == operator_id)
        and (store_name is None or s.store_name == store_name)
    ]
    if not stores:
        raise AnalysisError(f"{cp.root}: no store matches --operator/--store")
    plans, refusals, disk_per_stored_byte = plan_stores(cp, stores, batch, (current, partitions))
    refusals = checkpoint_refusals(cp) + refusals
    return Plan(
        checkpoint=cp.root,
        batch_id=batch,
        current_partitions=current,
        partitions=partitions,
        stores=tuple(plans),
        refusals=tuple(refusals),
        disk_per_stored_byte=disk_per_stored_byte,
    )


def plan_stores(
    cp: Checkpoint,
    stores: Sequence[StoreInfo],
    batch: int,
    counts: tuple[int, int],
    targets: dict[tuple[int, str, str], array[int]] | None = None,
    workers: ForkedPool | None = None,
) -> tuple[list[StorePlan], list[tuple[str, str]], float | None]:
    """Each view's plan for ``counts`` = (current, planned) partitions from the state of
    ``batch``, what is refused (store label, reason), and the bytes on disk per stored byte.

    With ``targets``, each view's new partition of every stored item, in the order
    :func:`keyed_targets` yields them (``UNPLACED`` where the hash does not cover the key), is
    kept there under ``(operator id, store name, view label)``: a rewrite then places the rows
    without decoding and hashing every key a second time (4 bytes an item). ``workers``
    read and hash the partitions in parallel."""
    plans: list[StorePlan] = []
    refusals: list[tuple[str, str]] = []
    disk = stored = 0
    for store in stores:
        if store.key_schema is None and not store.column_families:
            refusals.append(
                (f"{store.operator_id}/{store.store_name}", no_schema(store.operator_name))
            )
            continue
        for i, view in enumerate(views_of(store, cp.root)):
            try:
                kept = None if targets is None else array("I")
                plan, on_disk = _plan_view(
                    cp, store, view, counts, batch + 1, i == 0, kept, workers
                )
            except Refused as exc:
                refusals.append((f"{store.operator_id}/{view.label}", str(exc)))
                continue
            plans.append(plan)
            if targets is not None and kept is not None:
                targets[(store.operator_id, store.store_name, view.label)] = kept
            disk += on_disk
            stored += sum(plan.current_bytes)
    return plans, refusals, disk / stored if disk and stored else None


def _plan_view(
    cp: Checkpoint,
    store: StoreInfo,
    view: StateView,
    counts: tuple[int, int],
    version: int,
    count_disk: bool,
    kept: array[int] | None = None,
    workers: ForkedPool | None = None,
) -> tuple[StorePlan, int]:
    """One view's plan from ``counts`` = (current, planned) partitions, and (``count_disk``:
    once per store, whose views share the files) the bytes on disk its current partitions
    load at ``version``.

    Only the current partitions are read: after an earlier scale-down, directories of
    higher partitions remain, without the versions since (Spark reads
    ``spark.sql.shuffle.partitions`` of the batch, not the directories)."""
    current, partitions = counts
    source = StateSource(cp, view.request())
    operator = store.operator_name.removesuffix(INFERRED)
    rule = _rule(source, store, view)
    keys, sizes = [0] * partitions, [0] * partitions
    now_keys, now_sizes = [0] * current, [0] * current
    unhashed = on_disk = 0
    parts = [p for p in source.partitions if p < current]
    found = (
        (_partition_targets(source, view, counts, version, p) for p in parts)
        if workers is None
        # In order: ``kept`` is in reading order.
        else workers.results(
            partition_targets, [(cp.root, view, counts, version, p) for p in parts]
        )
    )
    for one in found:
        now_keys[one.partition], now_sizes[one.partition] = len(one.targets), one.size
        keys = [a + b for a, b in zip(keys, one.keys, strict=True)]
        sizes = [a + b for a, b in zip(sizes, one.sizes, strict=True)]
        unhashed += one.unhashed
        if kept is not None:
            kept.extend(one.targets)
    if count_disk:
        on_disk = sum(_disk_bytes(source, p, version) for p in source.partitions if p < current)
    label = (
        store.store_name if view.label == store.store_name else f"{store.store_name}/{view.label}"
    )
    plan = StorePlan(
        operator_id=store.operator_id,
        operator_name=operator,
        label=label,
        rule=rule,
        keys=tuple(keys),
        bytes=tuple(sizes),
        current_keys=tuple(now_keys),
        current_bytes=tuple(now_sizes),
        unhashed=unhashed,
        warning=shuffle_mismatch(operator, view.state_var or store.store_name),
    )
    return plan, on_disk


@dataclass(frozen=True)
class PartitionTargets:
    """One current partition's stored items: each one's new partition, in reading order
    (``UNPLACED`` where the hash does not cover its key), and what they add up to."""

    partition: int
    targets: array[int]
    size: int  # key and value bytes of its items
    keys: list[int]  # items per new partition
    sizes: list[int]  # their bytes per new partition
    unhashed: int


# The sources a worker process of a rewrite opened, by view (its life is the command's).
_OPENED: dict[tuple[str, StateView], StateSource] = {}


def partition_targets(
    task: tuple[str, StateView, tuple[int, int], int, int],
) -> PartitionTargets:
    """In a worker process: ``(checkpoint root, view, (current, planned) partitions,
    version, partition)``'s :class:`PartitionTargets`, the store opened once per worker (the
    task carries names, not the opened source)."""
    root, view, counts, version, part = task
    source = _OPENED.get((root, view))
    if source is None:
        source = _OPENED[(root, view)] = StateSource(Checkpoint.open(root), view.request())
    return _partition_targets(source, view, counts, version, part)


def _partition_targets(
    source: StateSource, view: StateView, counts: tuple[int, int], version: int, part: int
) -> PartitionTargets:
    partitions = counts[1]
    codec = source.row_codec
    rule = _rule(source, source.store, view)
    targets = array("I")
    keys, sizes = [0] * partitions, [0] * partitions
    size = unhashed = 0
    with source.decoding(part):
        for key, value, row in _keyed_items(source, part, version):
            item = len(key) + len(value)
            size += item
            schema, pkey = partition_key(rule, codec.key_schema, row)
            target = row_partition(schema, pkey, partitions)
            if target is None:
                targets.append(UNPLACED)
                unhashed += 1
                continue
            targets.append(target)
            keys[target] += 1
            sizes[target] += item
    return PartitionTargets(part, targets, size, keys, sizes, unhashed)


def keyed_targets(
    source: StateSource,
    store: StoreInfo,
    view: StateView,
    counts: tuple[int, int],
    version: int,
) -> Iterator[tuple[int, int | None, bytes, bytes]]:
    """``(current partition, new partition, key bytes, value bytes)`` of each stored item of
    this view at ``version``, the new partition where Spark's hash puts its partition key
    (None: a key of a type the hash does not cover); :class:`Refused` when Spark would refuse
    the store. Only partitions below the current count are read."""
    current, partitions = counts
    codec = source.row_codec
    rule = _rule(source, store, view)
    for part in [p for p in source.partitions if p < current]:
        with source.decoding(part):
            for key, value, row in _keyed_items(source, part, version):
                schema, pkey = partition_key(rule, codec.key_schema, row)
                yield part, row_partition(schema, pkey, partitions), key, value


def _rule(source: StateSource, store: StoreInfo, view: StateView) -> str:
    operator = store.operator_name.removesuffix(INFERRED)
    name = view.state_var or store.store_name
    return partition_key_rule(operator, name, source.row_codec.spec.state_kind)


def _keyed_items(
    source: StateSource, partition: int, version: int
) -> Iterator[tuple[bytes, bytes, tuple[object, ...]]]:
    """``(key bytes, value bytes, decoded key row)`` of each stored item of this view."""
    decode_key = source.row_codec.decode_key
    for key, value in source.load(partition, version):
        row = decode_key(key)
        if row is not None:
            yield key, value, tuple(row)


def _disk_bytes(source: StateSource, partition: int, version: int) -> int:
    """Bytes a restart of this partition at ``version`` loads now: the newest full version at
    or below it (zip and its SSTs) and the changelogs after it."""
    reader = source.reader(partition)
    fulls = [v for v in reader.full_versions() if v <= version]
    base = max(fulls, default=0)
    where = source.cp.store_dir(source.store.operator_id, partition, source.store.store_name)
    total = 0
    for f in source.cp.fs.list(where):
        found = reader.classify(f.name)
        if found is None:
            continue
        v, kind = found
        if (kind == reader.FULL_KIND and v == base) or (
            kind == reader.CHANGE_KIND and base < v <= version
        ):
            total += f.size
    if base:
        total += sum((reader.shared_files(base) or {}).values())
    return total
