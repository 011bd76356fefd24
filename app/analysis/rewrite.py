"""The plan of ``stateglass rewrite``, and which new partition each stored row goes to.

A rewrite reads every store at one committed batch ``B`` and writes a new checkpoint whose
state at version ``B + 1`` is one full snapshot per store partition, each key in the partition
Spark's own shuffle sends it to: ``pmod(murmur3(partition key), N)``, the partition key as the
repartition planner takes it (:mod:`.repartition.keys`: a join's ``keyWithIndexToValue`` index
and a session window's session are not hashed). The numbers per new partition are the
planner's (:func:`~.repartition.plan.plan_stores`), so ``plan-partitions`` and a dry run agree.

What is refused, before anything is written: a batch in flight (offsets without a commit)
unless ``batch_id`` names a committed batch; N < 1; nothing to change; a store the
destination's provider cannot hold (transformWithState on HDFS, as Spark 4.3 refuses it); a
source provider whose rows cannot be read as neutral rows; checkpoint format v2 sources (their
commits name each partition's files); a codec StateGlass cannot write.

Example::

    plan = plan_rewrite(Checkpoint.open("/data/cp"), RewriteRequest(partitions=8))
    for store in plan.partitioning.stores:
        print(store.label, store.keys)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from stateglass.app.analysis.errors import AnalysisError
from stateglass.app.analysis.repartition.keys import Refused
from stateglass.app.analysis.repartition.plan import (
    Plan,
    current_partitions,
    keyed_targets,
    plan_stores,
)
from stateglass.app.analysis.rewrite_command import rewrite_command
from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import views_of
from stateglass.collectors.errors import CollectorError, RewriteRefused
from stateglass.collectors.rewrite import NEUTRALIZERS, WRITERS, writer_class
from stateglass.parsers.compression import WRITABLE, get_codec
from stateglass.parsers.logs import (
    CONF_PROVIDER,
    CONF_SHUFFLE_PARTITIONS,
    OffsetSeq,
)

CONF_CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
CONF_CHECKPOINT_FORMAT = "spark.sql.streaming.stateStore.checkpointFormatVersion"
CONF_FILE_CHECKSUM = "spark.sql.streaming.checkpoint.fileChecksum.enabled"


@dataclass(frozen=True)
class RewriteRequest:
    """What the user asked for; None keeps the source's setting."""

    partitions: int | None = None
    provider: str | None = None
    changelog: bool | None = None
    batch_id: int | None = None


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

    @property
    def version(self) -> int:
        """The state version written: what a restart after batch ``batch_id`` loads."""
        return self.batch_id + 1

    @property
    def partitions(self) -> int:
        return self.partitioning.partitions

    @property
    def changelog(self) -> bool:
        return dict((k, new) for k, _, new in self.conf_changes).get(CONF_CHANGELOG) == "true"


def plan_rewrite(cp: Checkpoint, request: RewriteRequest) -> RewritePlan:
    """The plan for ``request`` (raises :class:`AnalysisError` for a request that cannot
    mean anything: N < 1, an unknown provider, a batch that is not committed)."""
    batch = cp.resolve_batch(request.batch_id)
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
    plans, refusals, disk = plan_stores(cp, stores, batch, (current, partitions))
    refusals = _refusals(cp, request, stores, provider, conf) + refusals
    changes = _conf_changes(conf, partitions, provider, request.changelog)
    if not changes:
        refusals.append(("request", "nothing to change: same partitions and provider"))
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
    )


@dataclass(frozen=True)
class RepartitionWay:
    """One way to give a checkpoint ``partitions`` partitions: Spark 4.2+'s offline
    repartition (in place, RocksDB only) or ``stateglass rewrite`` (a new checkpoint), with the
    command to run, or why it does not apply."""

    tool: str
    command: str
    refusal: str | None


def repartition_ways(
    cp: Checkpoint, partitions: int, spark_refusal: str | None
) -> tuple[RepartitionWay, RepartitionWay]:
    """Spark's repartition and ``stateglass rewrite`` for ``partitions``, each with its
    command or its refusal. Reads the logs and operator metadata only, never the state, so a
    page can say which applies before anyone asks for a plan."""
    spark = RepartitionWay(
        "Spark 4.2+ repartition",
        f"spark._streamingCheckpointManager.repartition({cp.root!r}, {partitions})",
        spark_refusal,
    )
    try:
        why = _rewrite_refusals(cp, partitions)
    except (AnalysisError, CollectorError) as exc:
        why = [str(exc)]
    rewrite = RepartitionWay(
        "stateglass rewrite",
        rewrite_command(cp.root, partitions=partitions),
        "; ".join(why) or None,
    )
    return spark, rewrite


def _rewrite_refusals(cp: Checkpoint, partitions: int) -> list[str]:
    stores = cp.stores()
    if not stores:
        return ["no state stores: a stateless query has nothing to rewrite"]
    request = RewriteRequest(partitions=partitions)
    conf = cp.offsets(cp.resolve_batch(None))
    found = _refusals(cp, request, stores, stores[0].provider, conf)
    return [f"{where}: {why}" for where, why in found]


def _refusals(
    cp: Checkpoint,
    request: RewriteRequest,
    stores: list[StoreInfo],
    provider: str,
    conf: OffsetSeq,
) -> list[tuple[str, str]]:
    """What stops the whole rewrite, before any state is read."""
    out: list[tuple[str, str]] = []
    offsets, commits = cp.offset_batch_ids, cp.commit_batch_ids
    if request.batch_id is None and offsets and (not commits or offsets[-1] > commits[-1]):
        out.append(
            (
                "checkpoint",
                f"batch {offsets[-1]} is in flight (offsets without a commit): stop the query "
                "after a batch completes, or name a committed batch with --batch-id",
            )
        )
    if conf.conf.get(CONF_CHECKPOINT_FORMAT, "1").strip() not in ("", "1"):
        out.append(
            (
                "checkpoint",
                "state store checkpoint format v2 (commits name each partition's files by "
                "unique id): not rewritten yet",
            )
        )
    if get_codec(conf.codec).NAME not in WRITABLE:
        out.append(("checkpoint", f"codec {conf.codec}: StateGlass writes only lz4"))
    writer = writer_class(provider)
    for store in stores:
        where = f"{store.operator_id}/{store.store_name}"
        if store.provider not in NEUTRALIZERS:
            out.append((where, f"provider {store.provider}: its rows cannot be read to rewrite"))
        why = writer.refusal(store)
        if why:
            out.append((where, why))
    return out


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
    at the plan's batch, as its provider stores them; a key the hash cannot place, or a store
    Spark would not partition, is a :class:`RewriteRefused`."""
    counts = (plan.partitioning.current_partitions, plan.partitions)
    for view in views_of(store, cp.root):
        source = StateSource(cp, view.request())
        try:
            for part, target, key, value in keyed_targets(
                source, store, view, counts, plan.version
            ):
                if target is None:
                    raise RewriteRefused(
                        cp.store_dir(store.operator_id, part, store.store_name),
                        "a key of a type Spark's hash is not reproduced for",
                    )
                yield part, target, key, value
        except Refused as exc:
            raise RewriteRefused(f"{store.operator_id}/{view.label}", str(exc)) from exc
