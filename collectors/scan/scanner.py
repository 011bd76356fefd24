"""Incremental scan of a checkpoint into the database, as a pipeline around the one writer.

One scan runs four phases:

1. **load** (I/O): open the checkpoint, read its operators, ask the database what earlier scans
   recorded (:meth:`Database.known`), list the files (:mod:`collectors.checkpoints.listing`) and
   diff the
   listing against what is known; parse only the new or changed offsets/commits;
2. **plan** (pure, :func:`collectors.scan.plan.plan`): the chains (operator, store, partition)
   with a new or changed file or a version not counted yet;
3. **run**: the engine (local or Spark) counts the keys of those chains;
4. **write**: the eviction audit and schema facts join the rows, and
   :meth:`Database.record_scan` writes one :class:`ScanWrite` in one transaction. Files that
   disappeared are marked purged: history is never deleted.

A :class:`CheckpointError` at any step is filed as a problem row and the scan goes on; any
other :class:`CollectorError` (the engine, the storage, the database) stops it before the
write, so that the next scan starts clean.

Example::

    db = Database("stateglass.duckdb")
    summary = scan_checkpoint(db, "/data/checkpoints/orders")
    print(summary.line())
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.listing import (
    FileDiff,
    Listing,
    diff_files,
    list_checkpoint,
    log_files,
)
from stateglass.collectors.db.writer import Database
from stateglass.collectors.db.writes import Chain, KnownScan, ScanWrite
from stateglass.collectors.engines import Engine, LocalEngine
from stateglass.collectors.errors import CheckpointError, CorruptFile
from stateglass.collectors.fs import FileSystem
from stateglass.collectors.scan.by_name import KnownListing, lookup_listing, new_versions, sst_files
from stateglass.collectors.scan.carry import KeyCarry
from stateglass.collectors.scan.chains import ChainResult, ChainTask
from stateglass.collectors.scan.checksums import KIND as CHECKSUM_KIND
from stateglass.collectors.scan.checksums import verify_files
from stateglass.collectors.scan.eviction_audit import run_audit, skipped_audit
from stateglass.collectors.scan.file_facts import (
    last_committed,
    schema_file_rows,
    sst_ref_rows,
    temp_file_rows,
)
from stateglass.collectors.scan.late_checks import LateChecks
from stateglass.collectors.scan.plan import (
    ChainSettings,
    commit_row,
    log_file_rows,
    offsets_row,
    operator_rows,
    plan,
    state_file_rows,
    version_rows,
)
from stateglass.collectors.scan.read_memo import ReadMemo
from stateglass.collectors.scan.reconcile import ReconcilePolicy
from stateglass.collectors.scan.remembered import Remembered, known_after
from stateglass.collectors.scan.schema_history import schema_files
from stateglass.collectors.scan.variable_counts import variable_rows
from stateglass.collectors.watch.heap_trim import give_back
from stateglass.parsers.logs import CommitMetadata, OffsetSeq, batch_id_of

Progress = Callable[[int, int], None]


class AfterWrite(Protocol):
    """What runs after each scan's writes (its rows, then a watcher's checksum checks): the
    layer above fills it in, e.g. a watcher stores the health verdicts of the checkpoint just
    scanned (``app/analysis/health/stored.py``). ``scan_at`` is the scan's ``last_scan``."""

    def __call__(self, db: Database, root: str, scan_at: datetime) -> None: ...


@dataclass(frozen=True)
class ScanSummary:
    """What one scan of one checkpoint did."""

    checkpoint: str
    files_added: int
    files_changed: int
    files_purged: int
    batches: int
    chains: int
    versions: int
    problems: int

    def line(self) -> str:
        return (
            f"{self.checkpoint}: {self.files_added} new, {self.files_changed} changed, "
            f"{self.files_purged} purged files; {self.batches} batches, {self.versions} versions "
            f"in {self.chains} partitions; {self.problems} problems"
        )


def _now() -> datetime:
    return datetime.now(tz=UTC).replace(tzinfo=None)


class ProblemLog:
    """The problem rows of one scan: what it could not read, filed so the scan goes on."""

    def __init__(self, root: str, now: datetime) -> None:
        self.root = root
        self.now = now
        self.rows: list[dict[str, Any]] = []

    def add(self, path: str, kind: str, message: str) -> None:
        self.rows.append(
            {
                "checkpoint": self.root,
                "path": path,
                "kind": kind,
                "message": message,
                "seen_at": self.now,
            }
        )

    def error(self, exc: CheckpointError) -> None:
        self.add(exc.path, type(exc).__name__, exc.why)

    def unique(self) -> list[dict[str, Any]]:
        """One row per (file, kind): the scan and a chain may both trip on the same file."""
        return list({(p["path"], p["kind"]): p for p in self.rows}.values())


@dataclass(frozen=True)
class Observed:
    """The load phase's answer: the checkpoint as it is now, beside what the database knows."""

    cp: Checkpoint
    now: datetime
    stores: list[StoreInfo]
    query_id: str | None
    known: KnownScan
    listing: Listing
    logs: FileDiff
    files: FileDiff
    problems: ProblemLog
    # False when the state files were looked up by name: what went away is not known.
    listed: bool = True
    # The known files a scan by name looked the new ones up beside (with them now).
    known_listing: KnownListing | None = None

    @property
    def root(self) -> str:
        return self.cp.root

    @property
    def rejudged(self) -> frozenset[str]:
        """Files that appeared, changed or went away: judged again by this scan."""
        return self.logs.touched | self.logs.removed | self.files.touched | self.files.removed


@dataclass(frozen=True)
class LogRows:
    """The ``batches`` rows of the offsets/ and commits/ files this scan parsed."""

    offsets: list[dict[str, Any]]
    commits: list[dict[str, Any]]
    commit_metadata: dict[int, CommitMetadata]

    @property
    def batches(self) -> int:
        return len({r["batch_id"] for r in self.offsets + self.commits})


def _read_metadata(cp: Checkpoint, problems: ProblemLog) -> tuple[list[StoreInfo], str | None]:
    """The stores and the query id; what cannot be read is a problem, not the scan's end."""
    cp.schema_problems = []
    try:
        stores = cp.stores()
        for exc in cp.schema_problems:
            problems.error(exc)
    except CheckpointError as exc:
        # Operator metadata or schemas unreadable: still record batches and the problem.
        problems.error(exc)
        stores = []
    try:
        query_id = cp.query_id
    except CheckpointError as exc:
        # A bad `metadata` is one problem; the state files are still collected.
        problems.error(exc)
        query_id = None
    return stores, query_id


def _read_logs(seen: Observed) -> LogRows:
    """Parse the new or changed ``offsets/N`` and ``commits/N``."""
    cp, listing = seen.cp, seen.listing
    rows = LogRows([], [], {})
    offsets_dir, commits_dir = cp.path("offsets"), cp.path("commits")
    for path in sorted(seen.logs.touched):
        stat = listing.log_files[path]
        batch = batch_id_of(path.rsplit("/", 1)[-1])
        if batch is None:
            continue
        try:
            if path.startswith(offsets_dir):
                seq = cp.parse(path, OffsetSeq.from_bytes)
                rows.offsets.append(offsets_row(cp.root, batch, stat, seq))
            elif path.startswith(commits_dir):
                commit = cp.parse(path, CommitMetadata.from_bytes)
                rows.commit_metadata[batch] = commit
                rows.commits.append(commit_row(cp.root, batch, stat, commit))
        except CheckpointError as exc:
            seen.problems.error(exc)
    return rows


def _file_empty_files(seen: Observed) -> None:
    for path in sorted(seen.logs.touched | seen.files.touched):
        stat = seen.listing.log_files.get(path) or seen.listing.state_files[path].stat
        if stat.size == 0:
            # Spark never writes an empty file (even an empty state is a framed stream),
            # and a chain need not read every file (a snapshot beside its delta).
            seen.problems.error(
                CorruptFile(path, "empty file (0 bytes): cut short or never written")
            )


def _unchecked(seen: Observed) -> dict[str, int]:
    """The new or changed files (path -> size as listed), to check against their checksum
    files: one that disagrees (or an SST with its own block checksums) is damaged."""
    listing = seen.listing
    sizes = {p: listing.state_files[p].stat.size for p in seen.files.touched}
    sizes.update({p: listing.log_files[p].size for p in seen.logs.touched})
    return sizes


def _verify(seen: Observed, sizes: dict[str, int]) -> None:
    """Problem rows for the files of ``sizes`` (path -> size) their checksum files disown."""
    for path, why in verify_files(seen.cp.fs, sizes):
        seen.problems.add(path, CHECKSUM_KIND, why)


def _chain_settings(seen: Observed, new_commits: dict[int, CommitMetadata]) -> ChainSettings:
    """Codec, checksums and merge delimiter from the newest readable offsets; every commit's
    unique ids when the checkpoint uses format v2."""
    cp, touched = seen.cp, seen.files.touched
    conf = cp.readable_conf if seen.stores else None
    commits: dict[int, CommitMetadata] = {}
    uses_v2 = any(c.state_unique_ids for c in new_commits.values())
    if uses_v2 or any("_" in p.rsplit("/", 1)[-1] for p in touched):
        # Format v2 needs every committed unique id, not only the new commits.
        for b in cp.commit_batch_ids:
            try:
                commits[b] = cp.commit(b)
            except CheckpointError:
                continue
    return ChainSettings(
        root=cp.root,
        codec=conf.codec if conf else "lz4",
        row_checksum=conf.row_checksum if conf else False,
        merge_delimiter=b"" if conf and conf.merge_operator_version == 2 else b",",
        commits=commits,
    )


def _pinned_conf(cp: Checkpoint, stores: list[StoreInfo]) -> str | None:
    """The newest offsets/N's conf as JSON (None when unreadable: already a problem row)."""
    conf = cp.readable_conf if stores or cp.offset_batch_ids else None
    return json.dumps(dict(sorted(conf.conf.items()))) if conf is not None else None


def _rewritten_at(cp: Checkpoint) -> int | None:
    """The batch ``stateglass rewrite`` wrote this checkpoint's state at; None for one Spark
    wrote, or when the mark cannot be read (the retention rule then counts from batch 0)."""
    try:
        mark = cp.rewrite_mark
    except CheckpointError:
        return None
    return mark.batch_id if mark else None


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection during one watcher scan. A watcher keeps the known files
    and the carried key sets (hundreds of thousands of objects) between scans, and each scan
    allocates tens of thousands more: the collector would walk them all several times a
    scan (a fifth of its time at 10,000 partitions). The scan's garbage is collected after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Scanner:
    """Scans checkpoints into one :class:`Database` with one engine.

    A watcher's scanner (``reconcile``: when to list every store directory again) looks new
    commits' files up by name between full listings, carries key sets from scan to scan, and
    checks new files' checksums right after writing their rows; ``collect`` and ``check`` list
    everything and check before their one write. ``after_write`` runs after each scan's writes.
    """

    def __init__(
        self,
        db: Database,
        engine: Engine | None = None,
        fs: FileSystem | None = None,
        *,
        audit: bool = True,
        reconcile: ReconcilePolicy | None = None,
        after_write: AfterWrite | None = None,
    ) -> None:
        self.db = db
        self.engine: Engine = engine or LocalEngine()
        self.fs = fs
        # The eviction audit decodes every key of audited stores again: big stores may skip it.
        self.audit = audit
        # A watcher's scans look new commits' files up by name between full listings; without
        # a policy every scan lists everything (collect, check).
        self.reconcile = reconcile
        # root -> what its last scan left (see collectors.scan.remembered): a watcher's scan by
        # name starts from it instead of reading the database and grouping the known files.
        self._remembered: dict[str, Remembered] = {}
        # A watcher's chains and audited partitions at their last version, for the next scan
        # (see collectors.scan.carry); an engine that ships tasks elsewhere does not carry keys.
        self.carry = KeyCarry()
        # A watcher checks new files' checksums right after writing its scan's rows
        # (collectors/scan/late_checks.py); collect and check before their one write.
        self.late = LateChecks() if reconcile is not None else None
        self.after_write = after_write
        # A full listing since the last trim (see :meth:`scan`).
        self._trim_due = False

    def remembered(self) -> list[Remembered]:
        """What this watcher remembers of each checkpoint between its scans."""
        return list(self._remembered.values())

    def scan(
        self, path: str, progress: Progress | None = None, by_name: bool = True
    ) -> ScanSummary:
        """Bring the database up to date with the checkpoint at ``path``.

        With a :class:`ReconcilePolicy`, new commits' files are looked up by name when no full
        listing is due (``by_name``); a scan by name that trips on anything lists in full.
        """
        if self.reconcile is None:
            return self._scan(path, progress, by_name)
        with _gc_paused():
            summary = self._scan(path, progress, by_name)
        if self._trim_due:
            # A full listing's transient peak (the known files read back, the listing's diff,
            # DuckDB's query buffers) is freed by now: glibc would keep its pages resident for
            # good in a watcher that runs for months (collectors/watch/heap_trim.py).
            self._trim_due = False
            give_back()
        return summary

    def _scan(self, path: str, progress: Progress | None, by_name: bool) -> ScanSummary:
        seen = self._load(path, by_name)
        logs = _read_logs(seen)
        _file_empty_files(seen)
        unchecked = _unchecked(seen)
        if self.late is None:
            _verify(seen, unchecked)
        else:
            seen.problems.rows += self.late.unwritten(seen.root, seen.rejudged)
        tasks = plan(
            seen.stores,
            seen.listing,
            seen.files.touched,
            seen.known.versions,
            _chain_settings(seen, logs.commit_metadata),
            seen.cp.store_dir,
            self._seed_of(seen.root),
        )
        # A watcher's audit replays the deltas the counting just read: it reads them once.
        reads = ReadMemo(seen.cp.fs) if self._carries() else None
        results = self._run(seen, tasks, progress, reads)
        if not seen.listed and seen.problems.rows:
            # What the database knows may be stale: a purged snapshot the chain started from,
            # a newer one Spark's maintenance wrote. The full listing settles it, and files
            # the problem rows the checkpoint really has.
            return self._scan(path, progress, by_name=False)
        if not seen.listed:
            new_ssts = sst_files(seen.cp, seen.listing, seen.known.state_files, results)
            seen = replace(seen, files=replace(seen.files, added=seen.files.added | set(new_ssts)))
            # Found through the zips after the checksums above: verified with them, or never
            # (the next full listing knows them already and reads no known file again).
            unchecked.update({p: size for p, (size, _) in new_ssts.items()})
            if self.late is None:
                _verify(seen, {p: size for p, (size, _) in new_ssts.items()})
        write = self._write(seen, logs, results, reads)
        if reads is not None:
            reads.clear()
        self.db.record_scan(write)
        if self.reconcile is not None:
            known = known_after(seen.known, write)
            self._remembered[seen.root] = Remembered(known, seen.known_listing)
        for result in results:
            if result.tail is not None:
                self.carry.keep((seen.root, "chain", *result.task.chain), *result.tail)
        summary = _summary(seen, logs, tasks, write)
        if self.late is not None:
            damaged = self._check_late(seen, unchecked)
            if damaged and not seen.listed:
                # As a scan by name that trips before its write: a full listing settles it.
                again = self._scan(path, progress, by_name=False)
                return _merged(summary, again, len(damaged))
            summary = replace(summary, problems=len({p["path"] for p in write.problems} | damaged))
        if self.after_write is not None:
            self.after_write(self.db, seen.root, seen.now)
        if self.reconcile is not None:
            if seen.listed:
                self.reconcile.listed(seen.root)
                self._trim_due = True
            else:
                self.reconcile.looked_up(seen.root)
        return summary

    def _check_late(self, seen: Observed, unchecked: dict[str, int]) -> set[str]:
        """A watcher's checksum checks, after its rows: the damaged files' problem rows are
        written, and remembered as known problems."""
        assert self.late is not None
        self.late.written(seen.root)
        damaged = self.late.check(self.db, seen.cp.fs, seen.root, seen.now, unchecked)
        kept = self._remembered.get(seen.root)
        if damaged and kept is not None:
            known = replace(kept.known, problem_paths=kept.known.problem_paths | damaged)
            self._remembered[seen.root] = Remembered(known, kept.listing)
        return damaged

    def _load(self, path: str, by_name: bool) -> Observed:
        """Open and list the checkpoint, and diff it against what earlier scans recorded."""
        now = _now()
        # A fresh file system per scan: a remote one lists each directory at most once in it.
        cp = Checkpoint.open(path, self.fs)
        problems = ProblemLog(cp.root, now)
        stores, query_id = _read_metadata(cp, problems)
        # Taken: given back only once this scan is written (a failed scan reads afresh).
        kept = self._remembered.pop(cp.root, None)
        by_name = by_name and self.reconcile is not None and not self.reconcile.full_due(cp.root)
        known = kept.known if by_name and kept is not None else self.db.known(cp.root)
        looked_up = self._look_up(cp, stores, known, kept) if by_name else None
        if looked_up is None:
            unchanged = {p: v for p, v in known.state_files.items() if p not in known.problem_paths}
            listing = list_checkpoint(cp, stores, unchanged)
            # A file with a problem is looked at again (stat-ed) every scan: it may be repaired.
            known_now = known.state_files
            current = {p: (f.stat.size, f.stat.mtime) for p, f in listing.state_files.items()}
        else:
            listing, current = looked_up[0]
            known_now = {p: known.state_files[p] for p in current if p in known.state_files}
        return Observed(
            cp=cp,
            now=now,
            stores=stores,
            query_id=query_id,
            known=known,
            listing=listing,
            logs=diff_files(
                known.log_files, {p: (s.size, s.mtime) for p, s in listing.log_files.items()}
            ),
            files=diff_files(known_now, current),
            problems=problems,
            listed=looked_up is None,
            known_listing=looked_up[1] if looked_up is not None else None,
        )

    def _look_up(
        self, cp: Checkpoint, stores: list[StoreInfo], known: KnownScan, kept: Remembered | None
    ) -> tuple[tuple[Listing, dict[str, tuple[int, float]]], KnownListing] | None:
        """The known files plus the new commits' files looked up by name (with
        ``path -> (size, mtime)`` of those found), and the known files to remember; None when
        only a full listing will do."""
        logs = log_files(cp)
        versions = new_versions(logs, known.log_files)
        commits = {}
        for version in versions:
            try:
                commits[version - 1] = cp.commit(version - 1)
            except CheckpointError:
                continue  # not committed yet, or unreadable: a problem of the log's own
        files = kept.listing if kept is not None else None
        if files is None or not files.fits(stores):
            files = KnownListing.build(cp, stores, known.state_files)
        found = lookup_listing(cp, stores, files, logs, versions, commits)
        return (found, files) if found is not None else None

    def _carries(self) -> bool:
        return self.reconcile is not None and self.engine.carries_keys

    def _seed_of(self, root: str) -> Callable[[Chain], tuple[int, set[bytes]] | None] | None:
        """A watcher's carried key set of each chain it plans (taken: the chain mutates it)."""
        if not self._carries():
            return None
        return lambda chain: self.carry.take((root, "chain", *chain))

    def _run(
        self,
        seen: Observed,
        tasks: list[ChainTask],
        progress: Progress | None,
        reads: ReadMemo | None = None,
    ) -> list[ChainResult]:
        """The engine counts the planned chains (reading through ``reads``, which remembers
        for the audit, when given); their problems join the scan's."""
        results: list[ChainResult] = []
        if progress:
            progress(0, len(tasks))
        try:
            for result in self.engine.run(tasks, reads or seen.cp.fs):
                results.append(result)
                if progress:
                    progress(len(results), len(tasks))
        except CheckpointError as exc:
            # An EngineError is not the checkpoint's fault and passes: nothing is recorded.
            seen.problems.error(exc)
        if reads is not None:
            reads.stop()
        # Engines return chains in any order (workers finish when they finish): put them back
        # in task order, so that every table is written as a serial run writes it.
        position = {id(task): i for i, task in enumerate(tasks)}
        results.sort(key=lambda r: position.get(id(r.task), len(tasks)))
        for result in results:
            for found in result.problems:
                seen.problems.add(found.path, found.kind, found.message)
        return results

    def _eviction(
        self, seen: Observed, logs: LogRows, results: list[ChainResult], reads: ReadMemo | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Eviction rules, and the audit that replays the versions just counted of the stores
        Spark evicts by event time, at the watermark of the batch that wrote each."""
        watermarks = dict(seen.known.watermarks)
        watermarks.update({r["batch_id"]: r["watermark_ms"] for r in logs.offsets})
        # What the audit cannot read marks its rule "not audited" instead of filing a problem.
        if not self.audit:
            rules, audit, _ = skipped_audit(seen.cp, seen.stores, watermarks)
            return rules, audit
        counted = {r.task.chain: (r.task, [c.version for c in r.versions]) for r in results}
        carry = self.carry if self._carries() else None
        rules, audit, _ = run_audit(seen.cp, seen.stores, counted, watermarks, carry, reads)
        return rules, audit

    def _write(
        self,
        seen: Observed,
        logs: LogRows,
        results: list[ChainResult],
        reads: ReadMemo | None = None,
    ) -> ScanWrite:
        """Everything the scan learnt, as the rows of one write."""
        cp, root, now, listing = seen.cp, seen.root, seen.now, seen.listing
        rules, audit = self._eviction(seen, logs, results, reads)
        # Health facts: the schema files (small, read at every scan) and the pinned conf.
        schemas = schema_files(cp, seen.stores)
        return ScanWrite(
            root=root,
            now=now,
            metadata_path=cp.path("metadata"),
            checkpoint={
                "checkpoint": root,
                "query_id": seen.query_id,
                "first_seen": now,
                "last_scan": now,
                "pinned_conf": _pinned_conf(cp, seen.stores),
                "rewritten_at_batch": _rewritten_at(cp),
            },
            operators=operator_rows(root, seen.stores),
            batch_offsets=logs.offsets,
            batch_commits=logs.commits,
            log_files=log_file_rows(root, listing, seen.logs.touched),
            logs_removed=tuple(seen.logs.removed),
            state_files=state_file_rows(root, listing, seen.files.touched, now),
            state_files_purged=tuple(sorted(seen.files.removed)),
            state_versions=version_rows(root, listing, results, seen.known.sst_bytes_live),
            rejudged=tuple(sorted(seen.rejudged)),
            problems=seen.problems.unique(),
            sst_refs=sst_ref_rows(root, results),
            temp_files=temp_file_rows(root, listing, now),
            temp_files_listed=seen.listed,
            schema_files=schema_file_rows(
                root, schemas, now, last_committed(listing, cp.path("commits"))
            ),
            eviction_rules=rules,
            eviction_audit=audit,
            variable_rows=variable_rows(
                root, seen.stores, results, reads or cp.fs, seen.problems.error
            ),
        )


def _summary(
    seen: Observed, logs: LogRows, tasks: list[ChainTask], write: ScanWrite
) -> ScanSummary:
    return ScanSummary(
        checkpoint=seen.root,
        files_added=len(seen.files.added) + len(seen.logs.added),
        files_changed=len(seen.files.changed) + len(seen.logs.changed),
        files_purged=len(seen.files.removed),
        batches=logs.batches,
        chains=len(tasks),
        versions=len(write.state_versions),
        # Damaged files: one file may have several problem rows (a checksum and a decoder).
        problems=len({p["path"] for p in write.problems}),
    )


def _merged(first: ScanSummary, again: ScanSummary, damaged: int) -> ScanSummary:
    """A scan by name and the full listing its late checks called for, as one scan."""
    return ScanSummary(
        checkpoint=first.checkpoint,
        files_added=first.files_added + again.files_added,
        files_changed=first.files_changed + again.files_changed,
        files_purged=first.files_purged + again.files_purged,
        batches=first.batches + again.batches,
        chains=first.chains + again.chains,
        versions=first.versions + again.versions,
        problems=first.problems + damaged + again.problems,
    )


def scan_checkpoint(
    db: Database,
    path: str,
    engine: Engine | None = None,
    fs: FileSystem | None = None,
    progress: Progress | None = None,
) -> ScanSummary:
    """Scan one checkpoint into ``db``; see :class:`Scanner`."""
    return Scanner(db, engine, fs).scan(path, progress)
