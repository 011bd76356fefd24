"""What stops ``stateglass rewrite`` before any state is read, and the two ways to give a
checkpoint another partition count (Spark 4.2+'s repartition, ``stateglass rewrite``).

Reads the logs and operator metadata only. Kept apart from :mod:`.rewrite` (which reads every
key through the repartition planner) so that the State page and ``plan-partitions`` can say
which way applies before anyone asks for a plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from stateglass.app.analysis.errors import AnalysisError
from stateglass.app.analysis.rewrite_command import rewrite_command
from stateglass.app.analysis.rewrite_edits import DropKeys
from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.errors import CollectorError
from stateglass.collectors.rewrite import NEUTRALIZERS, writer_class
from stateglass.parsers.compression import WRITABLE, get_codec
from stateglass.parsers.logs import OffsetSeq

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
    drop_keys: tuple[DropKeys, ...] = ()  # keys left out of the state written
    allow_empty: bool = False  # an edit may leave a store with no key
    evict_expired: bool = False  # leave out what Spark's eviction removes at the watermark
    watermark_ms: int | None = None  # with evict_expired: the batch's watermark raised to it


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
    found = refusals(cp, request, stores, stores[0].provider, conf)
    return [f"{where}: {why}" for where, why in found]


def is_format_v2(cp: Checkpoint, batch: int | None) -> bool:
    """Whether ``batch``'s state is in state store checkpoint format v2 (files named by
    unique ids that the commit lists). Spark 4.3 does not pin the format in the offsets
    entry, so the commit (``v2``, ``stateUniqueIds``) says it; a pinned conf counts too."""
    if batch is None or batch not in cp.commit_batch_ids:
        return False
    commit = cp.commit(batch)
    if commit.format_version >= 2 or commit.state_unique_ids:
        return True
    pinned = (
        cp.offsets(batch).conf.get(CONF_CHECKPOINT_FORMAT, "1")
        if batch in cp.offset_batch_ids
        else "1"
    )
    return pinned.strip() not in ("", "1")


def refusals(
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
    batch = cp.last_committed_batch if request.batch_id is None else request.batch_id
    if is_format_v2(cp, batch) and provider != "rocksdb":
        out.append(
            (
                "checkpoint",
                "state store checkpoint format v2 (commits name each partition's files by "
                f"unique id) keeps its state on RocksDB only, not {provider}",
            )
        )
    if conf.encoding_format != "unsaferow":
        out.append(
            (
                "checkpoint",
                f"state encoding {conf.encoding_format}: StateGlass rewrites UnsafeRow only",
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
