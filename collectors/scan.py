"""Incremental scan of a checkpoint into the database.

One scan: list the checkpoint (I/O, :mod:`collectors.listing`), diff the listing against what
the database holds (pure), parse only new or changed offsets/commits, run only the chains
(operator, store, partition) with a new or changed file or a version not counted yet, and mark
files that disappeared as purged. History is never deleted.

Example::

    db = Database("stateglass.duckdb")
    summary = scan_checkpoint(db, "/data/checkpoints/orders")
    print(summary.line())
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stateglass.collectors.chains import ChainResult, ChainTask
from stateglass.collectors.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.db import Database
from stateglass.collectors.engines import Engine, LocalEngine
from stateglass.collectors.errors import CheckpointError, CorruptFile, EngineError
from stateglass.collectors.eviction import run_audit, skipped_audit
from stateglass.collectors.facts import last_committed, write_facts
from stateglass.collectors.fs import FileSystem
from stateglass.collectors.listing import (
    FileStat,
    Listing,
    diff_files,
    list_checkpoint,
    version_file_stats,
)
from stateglass.collectors.schemas import schema_files
from stateglass.parsers.logs import CommitMetadata, OffsetSeq, batch_id_of

Progress = Callable[[int, int], None]


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


def _ts(mtime: float) -> datetime:
    """File mtimes are stored as naive UTC timestamps."""
    return datetime.fromtimestamp(mtime, tz=UTC).replace(tzinfo=None)


def _now() -> datetime:
    return datetime.now(tz=UTC).replace(tzinfo=None)


def _offsets_row(checkpoint: str, batch: int, stat: FileStat, seq: OffsetSeq) -> dict[str, Any]:
    formats = {k: v for k, v in sorted(seq.conf.items()) if "formatversion" in k.lower()}
    return {
        "checkpoint": checkpoint,
        "batch_id": batch,
        "batch_timestamp_ms": seq.batch_timestamp_ms,
        "watermark_ms": seq.batch_watermark_ms,
        "offsets_written_at": _ts(stat.mtime),
        "committed": False,
        "source_offsets": json.dumps(
            [{"source_id": s.source_id, "offset": s.offset_json} for s in seq.sources]
        ),
        "provider": seq.provider,
        "codec": seq.codec,
        "shuffle_partitions": seq.shuffle_partitions,
        "state_format_versions": json.dumps(formats),
    }


# offsets/N and commits/N arrive at different scans: each updates only its own columns.
_OFFSET_COLUMNS = (
    "batch_timestamp_ms,watermark_ms,offsets_written_at,source_offsets,provider,codec,"
    "shuffle_partitions,state_format_versions"
)
_COMMIT_COLUMNS = "committed,committed_at,next_watermark_ms"


def _store_rows(checkpoint: str, stores: Iterable[StoreInfo]) -> list[dict[str, Any]]:
    return [
        {
            "checkpoint": checkpoint,
            "operator_id": s.operator_id,
            "operator_name": s.operator_name,
            "store_name": s.store_name,
            "num_partitions": s.num_partitions,
            "provider": s.provider,
            "key_schema": s.key_schema.simple_string() if s.key_schema else None,
            "value_schema": s.value_schema.simple_string() if s.value_schema else None,
        }
        for s in stores
    ]


def _unique_ids(
    cp: Checkpoint, commits: dict[int, CommitMetadata], store: StoreInfo, partition: int
) -> tuple[tuple[int, str], ...]:
    """Checkpoint format v2: committed unique id of each version of this store partition."""
    from stateglass.collectors.state import (
        _store_index,
    )  # the join stores' order, kept in one place

    index = _store_index(store)
    out = []
    for batch, commit in sorted(commits.items()):
        ids = (commit.state_unique_ids or {}).get(store.operator_id)
        if ids is None or partition >= len(ids) or index >= len(ids[partition]):
            continue
        out.append((batch + 1, ids[partition][index]))
    return tuple(out)


def _pinned_conf(cp: Checkpoint, stores: list[StoreInfo]) -> str | None:
    """The newest offsets/N's conf as JSON (None when unreadable: already a problem row)."""
    conf = cp.readable_conf if stores or cp.offset_batch_ids else None
    return json.dumps(dict(sorted(conf.conf.items()))) if conf is not None else None


class Scanner:
    """Scans checkpoints into one :class:`Database` with one engine."""

    def __init__(
        self,
        db: Database,
        engine: Engine | None = None,
        fs: FileSystem | None = None,
        audit: bool = True,
    ) -> None:
        self.db = db
        self.engine: Engine = engine or LocalEngine()
        self.fs = fs
        # The eviction audit decodes every key of audited stores again: big stores may skip it.
        self.audit = audit

    def scan(self, path: str, progress: Progress | None = None) -> ScanSummary:
        """Bring the database up to date with the checkpoint at ``path``."""
        # A fresh file system per scan: a remote one lists each directory at most once in it.
        cp = Checkpoint.open(path, self.fs)
        root = cp.root
        problems: list[dict[str, Any]] = []
        now = _now()

        def problem(exc: CheckpointError) -> None:
            problems.append(
                {
                    "checkpoint": root,
                    "path": exc.path,
                    "kind": type(exc).__name__,
                    "message": exc.why,
                    "seen_at": now,
                }
            )

        cp.schema_problems = []
        try:
            stores = cp.stores()
            for exc in cp.schema_problems:
                problem(exc)
        except CheckpointError as exc:
            # Operator metadata or schemas unreadable: still record batches and the problem.
            problem(exc)
            stores = []
        try:
            query_id = cp.query_id
        except CheckpointError as exc:
            # A bad `metadata` is one problem; the state files are still collected.
            problem(exc)
            query_id = None

        with self.db.transaction() as conn:
            known_logs = {
                p: (s, m)
                for p, s, m in conn.execute(
                    "SELECT path, size_bytes, modified_at FROM log_files WHERE checkpoint = ?",
                    [root],
                ).fetchall()
            }
            known_files = {
                p: (s, m)
                for p, s, m in conn.execute(
                    "SELECT path, size_bytes, modified_at FROM state_files "
                    "WHERE checkpoint = ? AND NOT purged",
                    [root],
                ).fetchall()
            }
            counted: dict[tuple[int, str, int], set[int]] = {}
            for op, store, part, version in conn.execute(
                "SELECT operator_id, store_name, partition_id, version FROM state_versions "
                "WHERE checkpoint = ?",
                [root],
            ).fetchall():
                counted.setdefault((op, store, part), set()).add(version)
            live_ssts: dict[tuple[int, str, int], dict[int, int]] = {}
            for op, store, part, v, b in conn.execute(
                "SELECT operator_id, store_name, partition_id, version, sst_bytes_live "
                "FROM state_versions WHERE checkpoint = ? AND sst_bytes_live IS NOT NULL",
                [root],
            ).fetchall():
                live_ssts.setdefault((op, store, part), {})[v] = b
            watermarks: dict[int, int | None] = dict(
                conn.execute(
                    "SELECT batch_id, watermark_ms FROM batches WHERE checkpoint = ?", [root]
                ).fetchall()
            )
            problem_paths = {
                p
                for (p,) in conn.execute(
                    "SELECT path FROM problems WHERE checkpoint = ?", [root]
                ).fetchall()
            }
        # A file with a problem is looked at again (stat-ed) every scan: it may be repaired.
        listing = list_checkpoint(
            cp, stores, {p: v for p, v in known_files.items() if p not in problem_paths}
        )

        log_diff = diff_files(
            known_logs, {p: (s.size, s.mtime) for p, s in listing.log_files.items()}
        )
        file_diff = diff_files(
            known_files, {p: (f.stat.size, f.stat.mtime) for p, f in listing.state_files.items()}
        )

        offsets_rows, commit_rows, commits = self._read_logs(cp, listing, log_diff.touched, problem)
        for path in sorted(log_diff.touched | file_diff.touched):
            stat = listing.log_files.get(path) or listing.state_files[path].stat
            if stat.size == 0:
                # Spark never writes an empty file (even an empty state is a framed stream),
                # and a chain need not read every file (a snapshot beside its delta).
                problem(CorruptFile(path, "empty file (0 bytes): cut short or never written"))
        tasks = self._tasks(cp, stores, listing, file_diff.touched, counted, commits)

        results: list[ChainResult] = []
        if progress:
            progress(0, len(tasks))
        try:
            for result in self.engine.run(tasks, cp.fs):
                results.append(result)
                if progress:
                    progress(len(results), len(tasks))
        except EngineError:
            # Not the checkpoint's fault: record nothing, so the next scan starts clean.
            raise
        except CheckpointError as exc:
            problem(exc)
        # Engines return chains in any order (workers finish when they finish): put them back
        # in task order, so that every table is written as a serial run writes it.
        position = {id(task): i for i, task in enumerate(tasks)}
        results.sort(key=lambda r: position.get(id(r.task), len(tasks)))

        version_rows = self._version_rows(root, listing, results, live_ssts)
        for result in results:
            for chain_problem in result.problems:
                problems.append(
                    {
                        "checkpoint": root,
                        "path": chain_problem.path,
                        "kind": chain_problem.kind,
                        "message": chain_problem.message,
                        "seen_at": now,
                    }
                )
        # The eviction audit (issue 11): replays the versions just counted of the stores Spark
        # evicts by event time, at the watermark of the batch that wrote each.
        watermarks.update({r["batch_id"]: r["watermark_ms"] for r in offsets_rows})
        # What the audit cannot read marks its rule "not audited" instead of filing a problem.
        eviction = (
            run_audit(
                cp,
                stores,
                {r.task.chain: (r.task, [c.version for c in r.versions]) for r in results},
                watermarks,
            )
            if self.audit
            else skipped_audit(cp, stores, watermarks)
        )
        # Health facts: the schema files (small, read at every scan) and the pinned conf.
        schemas = schema_files(cp, stores)
        pinned_conf = _pinned_conf(cp, stores)

        with self.db.transaction() as conn:
            first_seen = conn.execute(
                "SELECT first_seen FROM checkpoints WHERE checkpoint = ?", [root]
            ).fetchall()
            self.db.upsert(
                conn,
                "checkpoints",
                [
                    {
                        "checkpoint": root,
                        "query_id": query_id,
                        "first_seen": first_seen[0][0] if first_seen else now,
                        "last_scan": now,
                        "pinned_conf": pinned_conf,
                    }
                ],
            )
            if stores:
                self.db.delete_where(conn, "operators", {"checkpoint": root})
                self.db.upsert(conn, "operators", _store_rows(root, stores))
            self.db.upsert(conn, "batches", offsets_rows, on_conflict=_OFFSET_COLUMNS)
            self.db.upsert(conn, "batches", commit_rows, on_conflict=_COMMIT_COLUMNS)
            self.db.upsert(
                conn,
                "log_files",
                [
                    {
                        "checkpoint": root,
                        "path": p,
                        "size_bytes": listing.log_files[p].size,
                        "modified_at": listing.log_files[p].mtime,
                    }
                    for p in sorted(log_diff.touched)
                ],
            )
            for p in log_diff.removed:
                self.db.delete_where(conn, "log_files", {"checkpoint": root, "path": p})
            state_rows = []
            for p in sorted(file_diff.touched):
                f = listing.state_files[p]
                state_rows.append(
                    {
                        "checkpoint": root,
                        "operator_id": f.operator_id,
                        "store_name": f.store_name,
                        "partition_id": f.partition_id,
                        "version": f.version,
                        "kind": f.kind,
                        "path": p,
                        "size_bytes": f.stat.size,
                        "modified_at": f.stat.mtime,
                        "purged": False,
                        "first_seen": now,
                        "purged_at": None,
                    }
                )
            self.db.upsert(conn, "state_files", state_rows)
            if file_diff.removed:
                conn.executemany(
                    "UPDATE state_files SET purged = TRUE, purged_at = ? "
                    "WHERE checkpoint = ? AND path = ?",
                    [[now, root, p] for p in sorted(file_diff.removed)],
                )
            self.db.upsert(conn, "state_versions", version_rows)
            # A file that appeared, changed or went away since the last scan has been judged
            # again by this one: its old problem rows give way to what this scan found.
            rejudged = log_diff.touched | log_diff.removed | file_diff.touched | file_diff.removed
            if rejudged:
                conn.execute(
                    "DELETE FROM problems WHERE checkpoint = ? "
                    "AND list_contains(?::VARCHAR[], path)",
                    [root, sorted(rejudged)],
                )
            # `metadata`, schema files and operator metadata are read at every scan: this scan's
            # problems with them replace the old ones (a repaired file loses its row).
            conn.execute(
                "DELETE FROM problems WHERE checkpoint = ? AND (path = ? "
                "OR contains(path, '/_metadata/') OR contains(path, '/_stateSchema/'))",
                [root, cp.path("metadata")],
            )
            # One row per (file, kind): the scan and a chain may both trip on the same file.
            problems = list({(p["path"], p["kind"]): p for p in problems}.values())
            self.db.upsert(conn, "problems", problems)
            last_batch = last_committed(listing, cp.path("commits"))
            write_facts(self.db, conn, root, listing, results, schemas, now, last_batch)
            self.db.write_eviction(conn, root, eviction[0], eviction[1])

        return ScanSummary(
            checkpoint=root,
            files_added=len(file_diff.added) + len(log_diff.added),
            files_changed=len(file_diff.changed) + len(log_diff.changed),
            files_purged=len(file_diff.removed),
            batches=len({r["batch_id"] for r in offsets_rows + commit_rows}),
            chains=len(tasks),
            versions=len(version_rows),
            problems=len(problems),
        )

    def _read_logs(
        self,
        cp: Checkpoint,
        listing: Listing,
        touched: frozenset[str],
        problem: Callable[[CheckpointError], None],
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, CommitMetadata]]:
        offsets_rows: list[dict[str, Any]] = []
        commit_rows: list[dict[str, Any]] = []
        commits: dict[int, CommitMetadata] = {}
        offsets_dir, commits_dir = cp.path("offsets"), cp.path("commits")
        for path in sorted(touched):
            stat = listing.log_files[path]
            batch = batch_id_of(path.rsplit("/", 1)[-1])
            if batch is None:
                continue
            try:
                if path.startswith(offsets_dir):
                    seq = cp.parse(path, OffsetSeq.from_bytes)
                    offsets_rows.append(_offsets_row(cp.root, batch, stat, seq))
                elif path.startswith(commits_dir):
                    commit = cp.parse(path, CommitMetadata.from_bytes)
                    commits[batch] = commit
                    commit_rows.append(
                        {
                            "checkpoint": cp.root,
                            "batch_id": batch,
                            "committed": True,
                            "committed_at": _ts(stat.mtime),
                            "next_watermark_ms": commit.next_batch_watermark_ms,
                        }
                    )
            except CheckpointError as exc:
                problem(exc)
        return offsets_rows, commit_rows, commits

    def _tasks(
        self,
        cp: Checkpoint,
        stores: list[StoreInfo],
        listing: Listing,
        touched: frozenset[str],
        counted: dict[tuple[int, str, int], set[int]],
        new_commits: dict[int, CommitMetadata],
    ) -> list[ChainTask]:
        conf = cp.readable_conf if stores else None
        codec = conf.codec if conf else "lz4"
        row_checksum = conf.row_checksum if conf else False
        merge_v = conf.merge_operator_version if conf else None
        versions: dict[tuple[int, str, int], set[int]] = {}
        dirty: dict[tuple[int, str, int], int] = {}
        for f in listing.state_files.values():
            if f.version is None:
                continue
            versions.setdefault(f.chain, set()).add(f.version)
            if f.stat.path in touched:
                dirty[f.chain] = min(dirty.get(f.chain, f.version), f.version)
        tasks = []
        uses_v2 = any(c.state_unique_ids for c in new_commits.values())
        all_commits: dict[int, CommitMetadata] = {}
        if uses_v2 or any("_" in p.rsplit("/", 1)[-1] for p in touched):
            # Format v2 needs every committed unique id, not only the new commits.
            for b in cp.commit_batch_ids:
                try:
                    all_commits[b] = cp.commit(b)
                except CheckpointError:
                    continue
        for store in stores:
            for partition in store.partitions:
                chain = (store.operator_id, store.store_name, partition)
                uncounted = versions.get(chain, set()) - counted.get(chain, set())
                starts = [
                    v for v in (dirty.get(chain), min(uncounted, default=None)) if v is not None
                ]
                if not starts:
                    continue
                store_dir = cp.store_dir(store.operator_id, partition, store.store_name)
                tasks.append(
                    ChainTask(
                        checkpoint=cp.root,
                        operator_id=store.operator_id,
                        store_name=store.store_name,
                        partition_id=partition,
                        store_dir=store_dir,
                        files=listing.store_dirs.get(store_dir),
                        provider=store.provider,
                        codec=codec,
                        row_checksum=row_checksum,
                        merge_delimiter=b"" if merge_v == 2 else b",",
                        unique_ids=_unique_ids(cp, all_commits, store, partition),
                        from_version=min(starts),
                        trust_zip_num_keys=not store.uses_column_families,
                    )
                )
        return tasks

    def _version_rows(
        self,
        root: str,
        listing: Listing,
        results: list[ChainResult],
        live_ssts: dict[tuple[int, str, int], dict[int, int]],
    ) -> list[dict[str, Any]]:
        by_chain: dict[tuple[int, str, int], list[Any]] = {}
        for f in listing.state_files.values():
            by_chain.setdefault(f.chain, []).append(f)
        rows = []
        for result in sorted(results, key=lambda r: r.task.chain):
            op, store, part = result.task.chain
            live = dict(live_ssts.get((op, store, part), {}))
            live.update(
                {
                    c.version: c.sst_bytes_live
                    for c in result.versions
                    if c.sst_bytes_live is not None
                }
            )
            stats = version_file_stats(
                by_chain.get(result.task.chain, []), [c.version for c in result.versions], live
            )
            for c in result.versions:
                s = stats[c.version]
                rows.append(
                    {
                        "checkpoint": root,
                        "operator_id": op,
                        "store_name": store,
                        "partition_id": part,
                        "version": c.version,
                        "num_keys": c.num_keys,
                        "keys_added": c.keys_added,
                        "keys_updated": c.keys_updated,
                        "keys_removed": c.keys_removed,
                        "delta_bytes": s.delta_bytes,
                        "snapshot_bytes": s.snapshot_bytes,
                        "sst_bytes_live": c.sst_bytes_live,
                        "sst_bytes_uploaded": c.sst_bytes_uploaded,
                        "sst_files_reused": c.sst_files_reused,
                        "sst_files_live": len(c.sst_files) if c.sst_files is not None else None,
                        "versions_since_snapshot": s.versions_since_snapshot,
                        "replay_bytes": s.replay_bytes,
                    }
                )
        return rows


def scan_checkpoint(
    db: Database,
    path: str,
    engine: Engine | None = None,
    fs: FileSystem | None = None,
    progress: Progress | None = None,
) -> ScanSummary:
    """Scan one checkpoint into ``db``; see :class:`Scanner`."""
    return Scanner(db, engine, fs).scan(path, progress)
