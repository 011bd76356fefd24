"""What a watcher remembers of a checkpoint between its scans by name, instead of asking again.

A scan starts from what earlier scans recorded (:meth:`Database.known`) and, when it looks the
new commits' files up by name, from the known files as a listing
(:class:`~collectors.increment.KnownListing`). Both grow with the checkpoint — 10,000 store
partitions are 140,000 known files and 120,000 counted versions — while one commit adds a
few per partition. So a watcher keeps both from one scan to the next and applies to them what
each scan wrote (:func:`known_after`), the same way :meth:`Database.record_scan` applies it to
the tables. A full listing (:class:`~collectors.reconcile.ReconcilePolicy`) reads the
database again, and so does any scan after one that failed: what is remembered is only ever
the state right after a write this process made.

Example::

    known = db.known(root)
    db.record_scan(write)
    known = known_after(known, write)   # equal to db.known(root), read from nothing
"""

from __future__ import annotations

from dataclasses import dataclass

from stateglass.collectors.db import KnownScan, ScanWrite
from stateglass.collectors.increment import KnownListing


@dataclass
class Remembered:
    """One checkpoint as its last scan left it: what the database knows, and its files."""

    known: KnownScan
    # Built at the first scan by name after a full listing; None until then.
    listing: KnownListing | None = None


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
