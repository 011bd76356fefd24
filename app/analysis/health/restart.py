"""The restart verdict: will Spark restart the query on this checkpoint, and if not, the way out.

One answer drawn from what Spark reads on restart, in its order: the query's ``metadata``, the
newest ``offsets/`` and ``commits/`` entries, an unfinished repartition
(:func:`stateglass.parsers.repartition.unfinished_repartition`), then the state version the next
batch loads (last committed batch + 1) in every partition of every store, loaded the way
Spark loads it (:mod:`.spark_load`, with its automatic snapshot repair), and, when a changed
query is given, ``compat``'s prediction. Three verdicts, and a fourth when no store can be
read at all:

- **restarts**: Spark restarts as the checkpoint is (possibly by its own snapshot repair);
- **restarts after repair**: Spark refuses as it is, and a repair that loses no committed
  batch gets it going (finish or drop an unfinished repartition);
- **will not restart**: the way out names the newest batch whose state is whole, the
  ``offsets/``, ``commits/`` and state files to move aside to restart there, and what is lost;
- **state not judged**: the logs are whole, but no store could be read (their provider has no
  reader here, say): whether the state loads is not known.

StateGlass never moves anything: the way out is for the user to apply, the query stopped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stateglass.app.analysis.chain_files import ChainFiles, bad_state_files
from stateglass.app.analysis.health.base import ERR, OK, WARN, Context, Finding
from stateglass.app.analysis.health.spark_load import Load, load_version
from stateglass.app.analysis.health.versions import live_chain_files
from stateglass.collectors.checkpoints.load_rule import RepairSettings
from stateglass.parsers.repartition import (
    UNFINISHED_REPARTITION_ERROR as UNFINISHED_REPARTITION,
)
from stateglass.parsers.repartition import (
    UnfinishedRepartition,
    unfinished_repartition,
)

if TYPE_CHECKING:
    from stateglass.app.analysis.compat.rules import Verdict as CompatVerdict

RESTARTS = "restarts"
AFTER_REPAIR = "restarts after repair"
WILL_NOT = "will not restart"
NOT_JUDGED = "state not judged"
STATUS = {RESTARTS: OK, AFTER_REPAIR: WARN, WILL_NOT: ERR, NOT_JUDGED: WARN}
HDFS = "hdfs"  # the provider as the history records it (``batches.provider``)


@dataclass(frozen=True)
class WayOut:
    """Restart at ``batch`` (None: no batch is whole; a new checkpoint is the way out)."""

    batch: int | None
    move_aside: tuple[str, ...] = ()  # paths relative to the checkpoint
    lost: str = ""
    steps: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "restart_at_batch": self.batch,
            "move_aside": list(self.move_aside),
            "lost": self.lost,
            "steps": self.steps,
        }


@dataclass(frozen=True)
class RestartVerdict:
    verdict: str
    reason: str
    evidence: tuple[str, ...] = ()
    way_out: WayOut | None = None
    error_class: str | None = None

    @property
    def status(self) -> str:
        return STATUS[self.verdict]

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "error_class": self.error_class,
            "evidence": list(self.evidence),
            "way_out": self.way_out.to_json() if self.way_out else None,
        }


@dataclass
class RestartFiles:
    """What the verdict reads from the history, once (or, for a rollback, from a listing of
    the checkpoint: :mod:`stateglass.app.analysis.rollback`)."""

    root: str
    offsets: set[int] = field(default_factory=set)
    commits: set[int] = field(default_factory=set)
    bad: set[str] = field(default_factory=set)
    partitions: dict[int, int | None] = field(default_factory=dict)
    providers: dict[int, str | None] = field(default_factory=dict)
    chains: dict[tuple[int, str, int], ChainFiles] = field(default_factory=dict)
    # (operator, store, provider, partitions per the operator metadata)
    stores: list[tuple[int, str, str | None, int]] = field(default_factory=list)
    state_files: list[tuple[int, str, int, int, str]] = field(default_factory=list)
    # Why the checkpoint's stores could not be read (an unknown provider): ``path: why``.
    unsupported: list[str] = field(default_factory=list)

    def log(self, kind: str, batch: int) -> str:
        return os.path.join(self.root, kind, str(batch))

    def good_log(self, kind: str, batch: int) -> bool:
        have = self.offsets if kind == "offsets" else self.commits
        return batch in have and self.log(kind, batch) not in self.bad

    @property
    def latest(self) -> int | None:
        return max(self.offsets, default=None)

    @property
    def last_committed(self) -> int | None:
        return max(self.commits, default=None)

    def partitions_at(self, batch: int, default: int) -> int:
        """The partition count of ``batch``: its pinned shuffle partitions when recorded."""
        known = [b for b, n in self.partitions.items() if n and b <= batch]
        return int(self.partitions[max(known)] or default) if known else default


def _read(ctx: Context) -> RestartFiles:
    cp = RestartFiles(ctx.checkpoint)
    for path, _ in bad_state_files(ctx).items():
        cp.bad.add(path)
    for (path,) in ctx.rows("SELECT path FROM log_files WHERE checkpoint = ?"):
        folder, _, name = path.rpartition("/")
        kind = folder.rpartition("/")[2]
        if folder.rpartition("/")[0] == ctx.checkpoint.rstrip("/") and name.isdigit():
            if kind == "offsets":
                cp.offsets.add(int(name))
            elif kind == "commits":
                cp.commits.add(int(name))
    for batch, parts, provider in ctx.rows(
        "SELECT batch_id, shuffle_partitions, provider FROM batches WHERE checkpoint = ?"
    ):
        cp.partitions[batch] = parts
        cp.providers[batch] = provider
    cp.chains = live_chain_files(ctx)
    cp.unsupported = [
        f"{path}: {why}"
        for path, why in ctx.rows(
            "SELECT path, message FROM problems WHERE checkpoint = ? "
            "AND kind = 'UnsupportedCheckpoint' ORDER BY path"
        )
    ]
    cp.stores = [
        (s.operator_id, s.store_name, s.provider, s.num_partitions or 0) for s in ctx.stores
    ]
    cp.state_files = list(
        ctx.rows(
            "SELECT operator_id, store_name, partition_id, version, path FROM state_files "
            "WHERE checkpoint = ? AND NOT purged AND version IS NOT NULL"
        )
    )
    return cp


def _rocksdb(provider: str | None) -> bool:
    return "rocksdb" in str(provider or "").lower()


def _loads(cp: RestartFiles, batch: int, repair: RepairSettings) -> list[tuple[str, Load]]:
    """How Spark loads the state batch ``batch`` reads (version ``batch``) in every partition."""
    out = []
    for op, store, provider, default in cp.stores:
        for part in range(cp.partitions_at(batch, default)):
            files = cp.chains.get((op, store, part), ChainFiles())
            load = load_version(files, batch, repair, _rocksdb(provider))
            out.append((f"op {op}/{store} p{part}", load))
    return out


def _failure(cp: RestartFiles, batch: int, repair: RepairSettings) -> str | None:
    """Why a restart whose next batch is ``batch`` fails, or None when it gets going."""
    if batch > 0 and not (cp.good_log("offsets", batch - 1) and cp.good_log("commits", batch - 1)):
        return f"offsets/{batch - 1} or commits/{batch - 1} is missing or unreadable"
    for where, load in _loads(cp, batch, repair):
        if not load.ok:
            return f"{where}: version {batch}: {load.failure}"
    return None


def restart_failure(cp: RestartFiles, batch: int, repair: RepairSettings) -> str | None:
    """Why a restart that resumes after committed batch ``batch`` fails, or None: what
    :func:`way_out` asks of each batch, for a rollback to ask of the one it is given."""
    return _failure(cp, batch + 1, repair)


def _newer_files(cp: RestartFiles, version: int) -> list[str]:
    """State files of versions after ``version``: a rerun writes them again, and a stale
    snapshot among them would shadow the rewritten version on a later load."""
    return sorted(
        os.path.relpath(path, cp.root)
        for _, _, _, v, path in cp.state_files
        if v > version and path.startswith(cp.root)
    )


def way_out(cp: RestartFiles, repair: RepairSettings) -> WayOut:
    """The newest batch B (offsets/B, commits/B and state version B + 1 whole) to restart at."""
    last = cp.last_committed
    latest = cp.latest if cp.latest is not None else -1
    if last is None:
        return WayOut(None, steps="no batch was ever committed: start on a new checkpoint")
    for batch in range(last - 1, -1, -1):
        if _failure(cp, batch + 1, repair) is not None:
            continue
        logs = [
            f"{kind}/{b}"
            for kind, top in (("offsets", latest), ("commits", last))
            for b in range(batch + 1, top + 1)
            if b in (cp.offsets if kind == "offsets" else cp.commits)
        ]
        files = _newer_files(cp, batch + 1)
        lost = (
            f"batches {batch + 1}..{last} are undone: the state of versions {batch + 2}.."
            f"{last + 1} is dropped and Spark plans those batches again from the sources' offsets "
            f"of batch {batch} (a source that no longer holds that input loses it; a sink that is "
            "not idempotent receives it twice)"
        )
        steps = (
            f"with the query stopped, move these {len(logs)} log entries and {len(files)} state "
            f"files out of the checkpoint (keep them), then start the query: it restarts at "
            f"batch {batch + 1}"
        )
        return WayOut(batch, tuple(logs + files), lost, steps)
    return WayOut(
        None,
        lost="all state",
        steps="no batch is whole (every older version is purged or damaged): restore the files "
        "from a backup or storage versioning, or start the query on a new checkpoint",
    )


def _unfinished(cp: RestartFiles, found: UnfinishedRepartition) -> RestartVerdict:
    provider = cp.providers.get(found.batch) or ""
    files = _newer_files(cp, found.batch)
    aside = (f"offsets/{found.batch}", *files)
    evidence = (
        f"offsets/{found.batch} pins spark.sql.shuffle.partitions {found.partitions_after}, "
        f"batch {found.batch - 1} {found.partitions_before}; no commits/{found.batch}",
        found.spark_message,
    )
    if provider == HDFS or provider.endswith("HDFSBackedStateStoreProvider"):
        steps = (
            "Spark cannot repartition an HDFS-provider checkpoint "
            "(STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER): with the query stopped, "
            f"move offsets/{found.batch} out of the checkpoint; the query restarts at batch "
            f"{found.batch} with {found.partitions_before} partitions"
        )
    else:
        steps = (
            "run the repartition again with the same count, "
            f"spark._streamingCheckpointManager.repartition(checkpoint, {found.partitions_after}), "
            f"and let it finish; or, to keep {found.partitions_before} partitions, move "
            f"offsets/{found.batch} and the state files of version {found.batch + 1} out of the "
            "checkpoint"
        )
    lost = "nothing: the repartition batch never committed"
    way = WayOut(found.last_committed, aside, lost, steps)
    reason = (
        f"batch {found.batch} is an unfinished repartition ({found.partitions_before} -> "
        f"{found.partitions_after} partitions): Spark refuses to start"
    )
    return RestartVerdict(AFTER_REPAIR, reason, evidence, way, UNFINISHED_REPARTITION)


def _logs_verdict(cp: RestartFiles, repair: RepairSettings) -> RestartVerdict | None:
    """A restart that fails on the query's own files before any state is read."""
    if os.path.join(cp.root, "metadata") in cp.bad:
        reason = "the query's metadata file (its id) cannot be read"
        return RestartVerdict(WILL_NOT, reason, (), way_out(cp, repair))
    last, latest = cp.last_committed, cp.latest
    if latest is not None and cp.log("offsets", latest) in cp.bad:
        reason = f"the newest offsets entry, offsets/{latest}, cannot be read"
        if last is not None and latest > last:
            way = WayOut(
                last,
                (f"offsets/{latest}",),
                "nothing: the batch never committed",
                f"move offsets/{latest} out of the checkpoint; Spark plans batch {latest} anew",
            )
            return RestartVerdict(AFTER_REPAIR, reason, (), way)
        return RestartVerdict(WILL_NOT, reason, (), way_out(cp, repair))
    if last is not None and cp.log("commits", last) in cp.bad:
        reason = f"the newest commits entry, commits/{last}, cannot be read"
        return RestartVerdict(WILL_NOT, reason, (), way_out(cp, repair))
    return None


def restart_verdict(
    ctx: Context, compat: CompatVerdict | None = None, next_name: str = ""
) -> RestartVerdict:
    """The verdict on ``ctx``'s checkpoint; ``compat``: ``compat``'s prediction for a changed
    query (``next_name`` names its checkpoint)."""
    cp = _read(ctx)
    repair = RepairSettings(
        ctx.config.spark.auto_snapshot_repair, ctx.config.spark.max_change_file_replay
    )
    early = _logs_verdict(cp, repair)
    if early is not None:
        return early
    found = unfinished_repartition(cp.partitions, cp.latest, cp.last_committed)
    if found is not None:
        return _unfinished(cp, found)
    last = cp.last_committed
    needed = last + 1 if last is not None else 0
    loads = _loads(cp, needed, repair) if last is not None else []
    failed = [(w, ld) for w, ld in loads if not ld.ok]
    if failed:
        where, load = failed[0]
        reason = f"{where}: state version {needed} (read by the next batch) cannot be loaded: "
        reason += load.failure
        more = f"{len(failed)} of {len(loads)} partitions fail to load" if len(failed) > 1 else ""
        evidence = tuple(f"{w}: {ld.failure}" for w, ld in failed[:5]) + ((more,) if more else ())
        return RestartVerdict(WILL_NOT, reason, evidence, way_out(cp, repair))
    evidence = _repairs(loads)
    if compat is not None and not compat.restarts:
        refusal = compat.refusals[0]
        reason = f"the changed query ({next_name}) is refused: {refusal.message}"
        way = WayOut(
            None,
            (),
            "",
            "keep the old query's stateful parts, or start the changed "
            "query on a new checkpoint (compat lists every difference)",
        )
        return RestartVerdict(WILL_NOT, reason, evidence, way, refusal.error_class)
    if last is not None and not loads and cp.unsupported:
        # Not "no state store": the stores are there, StateGlass cannot read them.
        reason = "the state stores cannot be read here, so whether their state loads is unknown"
        return RestartVerdict(NOT_JUDGED, reason, tuple(cp.unsupported[:5]))
    if last is None or not loads:
        why = "no batch committed yet" if last is None else "no state store"
        return RestartVerdict(RESTARTS, f"{why}: no state to load", evidence)
    reason = f"state version {needed} loads in all {len(loads)} store partitions"
    if evidence:
        reason += ", by Spark's automatic snapshot repair"
    if compat is not None:
        reason += f"; the changed query ({next_name}) is compatible"
    return RestartVerdict(RESTARTS, reason, evidence)


def context_verdict(ctx: Context) -> RestartVerdict:
    """:func:`restart_verdict` with ``ctx``'s own changed query, once per evaluation: the
    verdict and the rule that quotes it read a month's logs and files once, not twice."""
    if "restart_verdict" not in ctx.shared:
        ctx.shared["restart_verdict"] = restart_verdict(ctx, ctx.compat, ctx.next_name)
    found: RestartVerdict = ctx.shared["restart_verdict"]
    return found


def _repairs(loads: list[tuple[str, Load]]) -> tuple[str, ...]:
    out = []
    for where, load in loads:
        if load.repaired:
            skipped = ", ".join(str(v) for v in load.skipped)
            out.append(
                f"{where}: snapshot {skipped} cannot be read; Spark's automatic snapshot repair "
                f"loads snapshot {load.snapshot} and replays {load.version - (load.snapshot or 0)} "
                "deltas/changelogs instead (spark.sql.streaming.stateStore.autoSnapshotRepair)"
            )
    return tuple(out)


class Restart:
    """The verdict as the first health rule, so every page and report leads with it."""

    id = "restart"
    title = "Restart verdict"

    def check(self, ctx: Context) -> list[Finding]:
        verdict = context_verdict(ctx)
        text = f"{verdict.verdict}: {verdict.reason}"
        hint = ""
        if verdict.way_out is not None:
            way = verdict.way_out
            hint = way.steps + (f" (lost: {way.lost})" if way.lost else "")
        return [ctx.finding(self, verdict.status, text, hint)]
