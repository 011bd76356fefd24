"""What a watcher remembers of a checkpoint between its scans by name, instead of asking again.

A scan starts from what earlier scans recorded (:meth:`Database.known`) and, when it looks the
new commits' files up by name, from the known files as a listing
(:class:`~collectors.scan.by_name.KnownListing`). Both grow with the checkpoint — 10,000 store
partitions are 140,000 known files and 120,000 counted versions — while one commit adds a
few per partition. So a watcher keeps both from one scan to the next and applies to them what
each scan wrote (:func:`known_after`), the same way :meth:`Database.record_scan` applies it to
the tables. A full listing (:class:`~collectors.scan.reconcile.ReconcilePolicy`) reads the
database again, and so does any scan after one that failed: what is remembered is only ever
the state right after a write this process made.

Example::

    known = db.known(root)
    db.record_scan(write)
    known = known_after(known, write)   # equal to db.known(root), read from nothing
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from stateglass.collectors.checkpoints.listing import classify
from stateglass.collectors.db.writes import KnownScan, ScanWrite
from stateglass.collectors.scan.by_name import KnownListing


@dataclass
class Remembered:
    """One checkpoint as its last scan left it: what the database knows, and its files."""

    known: KnownScan
    # Built at the first scan by name after a full listing; None until then.
    listing: KnownListing | None = None


def sizes(remembered: Iterable[Remembered]) -> dict[str, int]:
    """How many entries the remembered checkpoints hold, by kind: what a soak watches grow."""
    out = {"versions": 0, "watermarks": 0, "files": 0, "listed_files": 0}
    for r in remembered:
        out["versions"] += sum(len(v) for v in r.known.versions.values())
        out["watermarks"] += len(r.known.watermarks)
        out["files"] += len(r.known.state_files) + len(r.known.log_files)
        out["listed_files"] += len(r.listing.files) if r.listing is not None else 0
    return out


def _oldest_version(files: Iterable[str]) -> int:
    """The oldest version a live state file holds (0 when none does), as
    :meth:`Database.known` bounds what it reads."""
    versions = (classify(path.rsplit("/", 1)[-1]) for path in files)
    return min((found[0] for found in versions if found and found[0] is not None), default=0)


def _forget_before(known: KnownScan, oldest: int) -> None:
    """Forget what :meth:`Database.known` no longer reads once Spark purged the files of
    versions before ``oldest``: their version rows, and the watermarks of the batches that
    wrote them (but the newest older one with a watermark, which tells how eviction reads).
    Without this, what a watcher remembers grows with every version until a full listing
    reads the database again."""
    for chain in list(known.versions):
        known.versions[chain].difference_update([v for v in known.versions[chain] if v < oldest])
        if not known.versions[chain]:
            del known.versions[chain]
    for chain in list(known.sst_bytes_live):
        live = known.sst_bytes_live[chain]
        for v in [v for v in live if v < oldest]:
            del live[v]
        if not live:
            del known.sst_bytes_live[chain]
    marks = known.watermarks
    older = [b for b in marks if b < oldest - 1]
    keep = max((b for b in older if (marks[b] or 0) > 0), default=None)
    for b in older:
        if b != keep:
            del marks[b]


def _rejudged(write: ScanWrite, path: str) -> bool:
    """Whether ``write`` replaces the problem rows of ``path`` (see ``_record_problems``)."""
    return path == write.metadata_path or "/_metadata/" in path or "/_stateSchema/" in path


def known_after(known: KnownScan, write: ScanWrite) -> KnownScan:
    """``known`` with ``write`` applied, as the tables hold it once the write is committed.

    Its dicts are updated in place: the caller hands over ``known`` (a scan takes what it
    remembers, and gives it back after its write)."""
    logs = known.log_files
    for row in write.log_files:
        logs[row["path"]] = (row["size_bytes"], row["modified_at"])
    for path in write.logs_removed:
        logs.pop(path, None)
    files = known.state_files
    for row in write.state_files:
        if row["purged"]:
            files.pop(row["path"], None)
        else:
            files[row["path"]] = (row["size_bytes"], row["modified_at"])
    purged = bool(write.state_files_purged) or any(r["purged"] for r in write.state_files)
    for path in write.state_files_purged:
        files.pop(path, None)
    for row in write.state_versions:
        chain = (row["operator_id"], row["store_name"], row["partition_id"])
        known.versions.setdefault(chain, set()).add(row["version"])
        if row["sst_bytes_live"] is not None:
            known.sst_bytes_live.setdefault(chain, {})[row["version"]] = row["sst_bytes_live"]
        elif chain in known.sst_bytes_live:
            known.sst_bytes_live[chain].pop(row["version"], None)
    for row in write.batch_offsets:
        known.watermarks[row["batch_id"]] = row["watermark_ms"]
    if purged:
        _forget_before(known, _oldest_version(files))
    gone = set(write.rejudged)
    problems = {p for p in known.problem_paths if p not in gone and not _rejudged(write, p)}
    problems.update(row["path"] for row in write.problems)
    return KnownScan(
        log_files=logs,
        state_files=files,
        versions=known.versions,
        sst_bytes_live=known.sst_bytes_live,
        watermarks=known.watermarks,
        problem_paths=frozenset(problems),
    )
