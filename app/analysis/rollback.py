"""A rollback: a rewrite that ends at an older committed batch ``B`` than the last one.

The destination ends at batch ``B`` (``offsets/`` and ``commits/`` stop there, the sources'
logs are cut there: :mod:`stateglass.collectors.rewrite.source_logs`), so a restart on it runs
batch ``B + 1`` from the sources' offsets of batch ``B``. What that replays depends on each
source, judged from its offsets in ``offsets/``:

- a **file source** (``{"logOffset": L}``) replays: its log is cut after its own batch ``L``,
  and the files of later log batches are read again as new files (those still in the input
  directory: a file moved or deleted since, e.g. by ``cleanSource``, is not);
- **Kafka** (``{"topic": {"partition": offset}}``) replays from those offsets while the topic
  still retains them (StateGlass cannot see the topic; with ``failOnDataLoss`` Spark stops
  where records are gone);
- the **rate** source (a bare number of seconds and a ``sources/<id>/0`` start time) replays:
  its rows are a function of the seconds and the start time; batch ``B + 1`` ends where the
  clock is at restart, so it spans more seconds than the source's batch ``B + 1`` did, and
  ``rate-micro-batch`` (``{"offset", "timestamp"}``) replays exactly;
- any other source: cannot tell.

The sink sees batch ids it has already seen: ``B + 1`` up to the last. The checkpoint does not
record its sink, so the plan says what each kind does: a file sink's ``_spark_metadata`` skips
a batch id it has committed (its output of those batches stays as it was, and is not written
again); ``foreachBatch`` and other sinks receive them again.

``B`` must be retained: ``offsets/B``, ``commits/B``, ``offsets/B-1`` (Spark reads it on
restart) and state version ``B + 1`` whole in every store partition, as the restart verdict
judges a restart (:func:`~.health.restart.restart_failure`); otherwise the refusal names the
oldest batch that is.

Example::

    rollback = plan_rollback(Checkpoint.open("/data/cp"), 41)
    for source in rollback.sources:
        print(source.source, source.kind, source.replays, source.why)
"""

from __future__ import annotations

from dataclasses import dataclass

from stateglass.app.analysis.chain_files import ChainFiles
from stateglass.app.analysis.errors import AnalysisError
from stateglass.app.analysis.health.restart import RestartFiles, restart_failure
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.listing import list_checkpoint
from stateglass.collectors.checkpoints.load_rule import RepairSettings
from stateglass.collectors.checkpoints.source_log import files_per_log_batch, keeps_log
from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.stores import CHANGE_KINDS, FULL_KINDS
from stateglass.parsers.offsets import FILE_LOG, offset_position

REPLAYS = "replays"
IF_RETAINED = "replays while retained"
CANNOT_TELL = "cannot tell"


@dataclass(frozen=True)
class SourceReplay:
    """What one source does when the destination restarts after batch ``B``."""

    source: str  # its id: sources/<id>
    kind: str  # file, kafka, rate, rate-micro-batch, or what its offset looks like
    replays: str  # REPLAYS, IF_RETAINED or CANNOT_TELL
    why: str


@dataclass(frozen=True)
class Rollback:
    """Batches ``batch_id + 1 .. last_committed`` undone, and what their replay does."""

    batch_id: int
    last_committed: int
    sources: tuple[SourceReplay, ...]
    sink: tuple[str, ...]


def plan_rollback(cp: Checkpoint, batch: int) -> Rollback | None:
    """The rollback to committed batch ``batch``; None when it is the last committed one.
    A batch that is not retained is an :class:`AnalysisError` naming the oldest that is."""
    last = cp.last_committed_batch
    if last is None or batch >= last:
        return None
    refuse_unretained(cp, batch)
    latest = cp.offset_batch_ids[-1]
    now = {s.source_id: s.offset_json for s in cp.offsets(batch).sources}
    then = {s.source_id: s.offset_json for s in cp.offsets(latest).sources}
    sources = tuple(_replay(cp, sid, now.get(sid), then.get(sid)) for sid in then or now)
    return Rollback(batch, last, sources, sink_lines(batch, last))


def sink_lines(batch: int, last: int) -> tuple[str, ...]:
    """What a sink does with batch ids ``batch + 1 .. last`` it has seen (the checkpoint does
    not record the sink, so both kinds are said)."""
    ids = f"{batch + 1}..{last}" if last > batch + 1 else str(last)
    return (
        f"the checkpoint does not record its sink; batch ids {ids} run again:",
        f"file sink: its _spark_metadata already has batch ids {ids}, so it skips them: its "
        "output of those batches stays as written before and the replay's is not written "
        f"(write to a new output directory to have them again); batch {last + 1} on is written",
        f"foreachBatch (and other sinks): batch ids {ids} are delivered again, with the "
        "replay's rows: a writer that is not idempotent per batch id receives them twice",
    )


def _replay(cp: Checkpoint, source: str, at: str | None, latest: str | None) -> SourceReplay:
    """How source ``source`` replays from its offset ``at`` (batch B) up to ``latest``."""
    now = offset_position(at) if at is not None else None
    then = offset_position(latest) if latest is not None else None
    if then is not None and then[1] == FILE_LOG:
        log_batch = int(now[0]) if now is not None else -1  # void: nothing read by then
        counts = files_per_log_batch(cp.root, source)
        again = sum(n for b, n in counts.items() if b > log_batch)
        why = (
            f"its log is cut after its log batch {log_batch}; the {again} files of later log "
            "batches are read again as new files, those still in the input directory"
        )
        return SourceReplay(source, "file", REPLAYS, why)
    if now is None:
        why = "no offset at the batch" if at is None else f"an offset not known here: {at}"
        return SourceReplay(source, "unknown", CANNOT_TELL, why)
    position, unit = now
    if unit == "records":
        more = f" ({int(then[0] - position)} records)" if then and then[1] == unit else ""
        why = (
            f"re-reads from the offsets of the batch{more}, while the topic still retains them "
            "(not visible here; with failOnDataLoss Spark stops where records are gone)"
        )
        return SourceReplay(source, "kafka", IF_RETAINED, why)
    if unit == "rows":
        why = "its rows are a function of the offset: the same rows again"
        return SourceReplay(source, "rate-micro-batch", REPLAYS, why)
    if keeps_log(cp.root, source):
        why = (
            f"rows from second {int(position)} on are generated again from its start time "
            f"(sources/{source}/0); the next batch ends where the clock is at restart, so it "
            "spans more seconds than the source's next batch did"
        )
        return SourceReplay(source, "rate", REPLAYS, why)
    why = "a bare-number offset and no source log (socket, memory or a custom source)"
    return SourceReplay(source, "unknown", CANNOT_TELL, why)


def refuse_unretained(cp: Checkpoint, batch: int) -> None:
    """An :class:`AnalysisError` when a restart cannot resume after ``batch`` on what
    ``cp`` holds, naming the oldest committed batch it can resume after."""
    files = restart_files(cp)
    why = _not_whole(cp, files, batch)
    if why is None:
        return
    oldest = next((b for b in sorted(files.commits) if _not_whole(cp, files, b) is None), None)
    way = (
        f"the oldest batch whose state is whole is {oldest} (--batch-id {oldest})"
        if oldest is not None
        else "no batch's state is whole"
    )
    raise AnalysisError(f"{cp.root}: batch {batch} is not retained ({why}); {way}")


def _not_whole(cp: Checkpoint, files: RestartFiles, batch: int) -> str | None:
    # Spark reads offsets/B-1 when it restarts at B (its committed offsets).
    if batch > 0 and batch - 1 not in files.offsets:
        return f"offsets/{batch - 1} is gone; Spark reads it to restart after batch {batch}"
    return restart_failure(files, batch, RepairSettings())


def restart_files(cp: Checkpoint) -> RestartFiles:
    """What the restart verdict reads, from a listing of ``cp`` instead of the history (no
    file is judged damaged: the rewrite's own reads name a damaged one)."""
    stores = cp.stores()
    listing = list_checkpoint(cp, stores)
    chains: dict[tuple[int, str, int], ChainFiles] = {}
    for chain, by_path in listing.chains().files.items():
        files = chains.setdefault(chain, ChainFiles())
        for f in by_path.values():
            if f.version is not None and f.kind in CHANGE_KINDS:
                files.change.add(f.version)
            elif f.version is not None and f.kind in FULL_KINDS:
                files.full.add(f.version)
    partitions: dict[int, int | None] = {}
    for batch in cp.offset_batch_ids:
        try:
            partitions[batch] = cp.offsets(batch).shuffle_partitions
        except CheckpointError:
            partitions[batch] = None
    return RestartFiles(
        cp.root,
        offsets=set(cp.offset_batch_ids),
        commits=set(cp.commit_batch_ids),
        partitions=partitions,
        chains=chains,
        stores=[(s.operator_id, s.store_name, s.provider, s.num_partitions) for s in stores],
    )
