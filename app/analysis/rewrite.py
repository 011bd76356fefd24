"""The plan of ``stateglass rewrite``, and which new partition each stored row goes to.

A rewrite reads every store at one committed batch ``B`` and writes a new checkpoint whose
state at version ``B + 1`` is one full snapshot per store partition, each key in the partition
Spark's own shuffle sends it to: ``pmod(murmur3(partition key), N)``, the partition key as the
repartition planner takes it (:mod:`.repartition.keys`: a join's ``keyWithIndexToValue`` index
and a session window's session are not hashed). A transformWithState store is read a
partition at a time, every column family of it (state variables, their row counters and TTL
indexes, both timer indexes), each key sent where its grouping key goes
(:func:`~.repartition.keys.column_family_key_path`). The numbers per new partition are the
planner's (:func:`~.repartition.plan.plan_stores`), so ``plan-partitions`` and a dry run agree.

An older committed batch ``B`` is a rollback (:mod:`.rollback`): the destination ends at
``B`` and its restart replays the sources from ``B + 1``; ``B`` must be retained.

What is refused, before anything is written: a batch in flight (offsets without a commit)
unless ``batch_id`` names a committed batch; a batch that is not retained; N < 1; nothing to
change (same partitions and provider at the last committed batch, and no edit); a store the
destination's provider cannot hold (transformWithState on HDFS, as Spark 4.3 refuses it); a
source provider whose rows cannot be read as neutral rows; checkpoint format v2 sources to a
provider other than RocksDB; Avro-encoded state; a codec StateGlass cannot write; an edit that
cannot mean anything (:mod:`.rewrite_edits`, whose per-store row filters the plan carries).

Example::

    plan = plan_rewrite(Checkpoint.open("/data/cp"), RewriteRequest(partitions=8))
    for store in plan.partitioning.stores:
        print(store.label, store.keys)
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stateglass.app.analysis import rewrite_refusals
from stateglass.app.analysis.errors import AnalysisError
from stateglass.app.analysis.repartition.grouping import grouped_rows
from stateglass.app.analysis.repartition.keys import (
    DROP_LAST,
    Refused,
)
from stateglass.app.analysis.repartition.plan import (
    UNPLACED,
    Plan,
    current_partitions,
    keyed_targets,
    plan_stores,
)
from stateglass.app.analysis.rewrite_edits import Edits, plan_edits
from stateglass.app.analysis.rewrite_refusals import (
    CONF_CHANGELOG,
    CONF_FILE_CHECKSUM,
    RewriteRequest,
)
from stateglass.app.analysis.rollback import Rollback, plan_rollback
from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import views_of
from stateglass.collectors.errors import RewriteRefused
from stateglass.collectors.rewrite import WRITERS, writer_class
from stateglass.parsers.logs import (
    CONF_PROVIDER,
    CONF_SHUFFLE_PARTITIONS,
    OffsetSeq,
)
from stateglass.parsers.partitioning import row_partition

if TYPE_CHECKING:
    from stateglass.collectors.engines.forked import ForkedPool


@dataclass(frozen=True)
class RewritePlan:
    """What a rewrite writes, from the state of ``batch_id``."""

    checkpoint: str
    batch_id: int
    source_provider: str
    provider: str
    partitioning: Plan  # keys and bytes per new partition, skew, restart cost, time
    conf_changes: tuple[tuple[str, str | None, str], ...]  # (conf, before, after)
    metadata_changes: tuple[str, ...]  # operator metadata files and what changes in them
    files: tuple[str, ...]  # store partition directories that get a full version
    refusals: tuple[tuple[str, str], ...]  # (where, why): nothing is written while any
    codec: str
    row_checksum: bool
    file_checksum: bool
    rollback: Rollback | None  # set when the batch is older than the last committed one
    edits: Edits = field(default_factory=Edits)  # keys left out per store: the row filter
    # Each view's new partition per stored item, in reading order (plan_stores' targets):
    # kept when the plan is to be carried out, so the rows are not hashed twice.
    targets: Mapping[tuple[int, str, str], array[int]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def version(self) -> int:
        """The state version written: what a restart after batch ``batch_id`` loads."""
        return self.batch_id + 1

    @property
    def partitions(self) -> int:
        return self.partitioning.partitions

    @property
    def last_field_unhashed(self) -> frozenset[tuple[int, str]]:
        """``(operator id, store)`` of the stores whose key's last field Spark's shuffle
        leaves out of the hash: a join's ``keyWithIndexToValue`` index, a session window's
        session."""
        stores = self.partitioning.stores
        return frozenset((s.operator_id, s.label) for s in stores if s.rule == DROP_LAST)

    @property
    def changelog(self) -> bool:
        return dict((k, new) for k, _, new in self.conf_changes).get(CONF_CHANGELOG) == "true"


def plan_rewrite(
    cp: Checkpoint,
    request: RewriteRequest,
    keep_targets: bool = False,
    workers: ForkedPool | None = None,
) -> RewritePlan:
    """The plan for ``request`` (raises :class:`AnalysisError` for a request that cannot
    mean anything: N < 1, an unknown provider, a batch that is not committed); with
    ``keep_targets``, each row's new partition is kept for :func:`assigned_rows`; with
    ``workers``, the stores' partitions are read and hashed in them."""
    batch = cp.resolve_batch(request.batch_id)
    rollback = plan_rollback(cp, batch)  # before any state is read: B must be retained
    stores = cp.stores()
    if not stores:
        raise AnalysisError(f"{cp.root}: no state stores: a stateless query has nothing to rewrite")
    conf = cp.offsets(batch)
    source_provider = stores[0].provider
    provider = request.provider or source_provider
    if provider not in WRITERS:
        raise AnalysisError(
            f"--provider {provider}: no writer for it (writers: {', '.join(sorted(WRITERS))})"
        )
    current = current_partitions(cp, batch)
    partitions = current if request.partitions is None else request.partitions
    if partitions < 1:
        raise AnalysisError(f"--partitions {partitions}: must be at least 1")
    targets: dict[tuple[int, str, str], array[int]] | None = {} if keep_targets else None
    plans, refusals, disk = plan_stores(cp, stores, batch, (current, partitions), targets, workers)
    refusals = rewrite_refusals.refusals(cp, request, stores, provider, conf) + refusals
    changes = _conf_changes(conf, partitions, provider, request.changelog)
    edits = plan_edits(
        cp,
        batch,
        request.drop_keys,
        request.allow_empty,
        request.evict_expired,
        request.watermark_ms,
    )
    refusals += edits.refusals
    if not changes and rollback is None and not edits.asked:
        refusals.append(
            ("request", "nothing to change: same partitions and provider, the last batch")
        )
    partitioning = Plan(cp.root, batch, current, partitions, tuple(plans), (), disk)
    return RewritePlan(
        checkpoint=cp.root,
        batch_id=batch,
        source_provider=source_provider,
        provider=provider,
        partitioning=partitioning,
        conf_changes=tuple(changes),
        metadata_changes=_metadata_changes(stores, current, partitions),
        files=tuple(_store_dir(s, p) for s in stores for p in range(partitions)),
        refusals=tuple(refusals),
        codec=conf.codec,
        row_checksum=conf.row_checksum,
        file_checksum=conf.conf.get(CONF_FILE_CHECKSUM, "false").strip().lower() == "true",
        rollback=rollback,
        edits=edits,
        targets=targets or {},
    )


def _conf_changes(
    conf: OffsetSeq, partitions: int, provider: str, changelog: bool | None
) -> list[tuple[str, str | None, str]]:
    """The pinned confs of the last offsets entry that change."""
    wanted = {
        CONF_SHUFFLE_PARTITIONS: str(partitions),
        CONF_PROVIDER: writer_class(provider).PROVIDER_CLASS,
    }
    if changelog is not None:
        wanted[CONF_CHANGELOG] = "true" if changelog else "false"
    before = dict(conf.conf)
    if before.get(CONF_PROVIDER) is None and provider == "hdfs":
        before[CONF_PROVIDER] = wanted[CONF_PROVIDER]  # Spark's default: unchanged
    return [(k, before.get(k), v) for k, v in wanted.items() if before.get(k) != v]


def _metadata_changes(stores: list[StoreInfo], current: int, partitions: int) -> tuple[str, ...]:
    if current == partitions:
        return ()
    ops = sorted({s.operator_id for s in stores})
    return tuple(f"state/{op}/_metadata: numPartitions {current} → {partitions}" for op in ops)


def _store_dir(store: StoreInfo, partition: int) -> str:
    base = f"state/{store.operator_id}/{partition}"
    return base if store.store_name == "default" else f"{base}/{store.store_name}"


def assigned_rows(
    cp: Checkpoint, store: StoreInfo, plan: RewritePlan
) -> Iterator[tuple[int, int, bytes, bytes]]:
    """``(current partition, new partition, key, value)`` of every stored row of ``store``
    at the plan's batch, as its provider stores them (a store with virtual column families:
    under the rewrite's column family ids); a key the hash cannot place, or a store Spark
    would not partition, is a :class:`RewriteRefused`. Rows are placed by the plan's kept
    targets when it has them, else hashed here."""
    if store.uses_column_families:
        yield from _column_family_rows(cp, store, plan)
        return
    counts = (plan.partitioning.current_partitions, plan.partitions)
    for view in views_of(store, cp.root):
        source = StateSource(cp, view.request())
        kept = plan.targets.get((store.operator_id, store.store_name, view.label))
        rows = (
            keyed_targets(source, store, view, counts, plan.version)
            if kept is None
            else _kept_targets(source, kept, counts[0], plan.version)
        )
        try:
            for part, target, key, value in rows:
                if target is None:
                    raise RewriteRefused(
                        cp.store_dir(store.operator_id, part, store.store_name),
                        "a key of a type Spark's hash is not reproduced for",
                    )
                yield part, target, key, value
        except Refused as exc:
            raise RewriteRefused(f"{store.operator_id}/{view.label}", str(exc)) from exc


def _column_family_rows(
    cp: Checkpoint, store: StoreInfo, plan: RewritePlan
) -> Iterator[tuple[int, int, bytes, bytes]]:
    """:func:`assigned_rows` of a store with virtual column families: each source partition
    read once, every key under the rewrite's column family ids, sent where its grouping key
    goes."""
    current = plan.partitioning.current_partitions
    for row in grouped_rows(cp, store, plan.batch_id, below=current):
        target = row_partition(row.grouping_schema, row.grouping_key, plan.partitions)
        if target is None:
            where = cp.store_dir(store.operator_id, row.partition, store.store_name)
            raise RewriteRefused(where, "a key of a type Spark's hash is not reproduced for")
        yield row.partition, target, row.moved_key, row.moved_value


def _kept_targets(
    source: StateSource, kept: array[int], current: int, version: int
) -> Iterator[tuple[int, int | None, bytes, bytes]]:
    """:func:`keyed_targets` from the targets the plan kept: the rows read again in the same
    order, no key decoded or hashed. A different count of rows means the store changed."""
    placed = iter(kept)
    read = 0
    for part in [p for p in source.partitions if p < current]:
        for key, value in source.load(part, version):
            target = next(placed, None)
            read += 1
            if target is None:
                break
            yield part, None if target == UNPLACED else target, key, value
    if read != len(kept):
        where = source.cp.store_dir(source.store.operator_id, 0, source.store.store_name)
        raise RewriteRefused(
            where, f"read {read} rows where the plan read {len(kept)}: SRC changed meanwhile"
        )
