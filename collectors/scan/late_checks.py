"""A watcher's checksum checks of a commit's new files, made right after its rows are written.

Reading every new file and its checksum file is the largest part of a watcher's scan of one
commit on a big checkpoint (10,000 store partitions: 20,000 files, a third of the scan), and
what it finds is one kind of problem row: no count, no version and no other verdict of the
scan depends on it. So a watcher writes the commit's rows first and checks the files right
after, in the same call, before the health verdicts are judged; a file that disagrees with its
checksum file gets the same ``ChecksumMismatch`` row as when checked before the write, written
in a second transaction. ``collect`` and ``check`` still check before their one write.

A watcher's scan by name that finds a damaged file lists the checkpoint in full right after,
as one that trips on anything before its write does (the caller's part). If writing the rows
fails (the database busy), they are kept here and join the checkpoint's next scan's write,
unless that scan judges the file again. A watcher killed between the two writes loses the
verdict: its files are known, and files seen before are never checked again.

Example::

    late = LateChecks()
    write = ...; db.record_scan(write)
    damaged = late.check(db, cp.fs, root, now, sizes)   # paths with a new problem row
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from stateglass.collectors.errors import CollectorError
from stateglass.collectors.scan.checksums import KIND, verify_files

if TYPE_CHECKING:
    from stateglass.collectors.db.writer import Database
    from stateglass.collectors.fs import FileSystem


class LateChecks:
    """Checksum verdicts of a watcher's scans, written after the scans' rows."""

    def __init__(self) -> None:
        # root -> problem rows a failed write left unwritten
        self._unwritten: dict[str, list[dict[str, Any]]] = {}

    def unwritten(self, root: str, rejudged: Iterable[str]) -> list[dict[str, Any]]:
        """The rows an earlier write left out, for this scan's write: those of files the scan
        judges again are dropped (it checks them afresh)."""
        again = set(rejudged)
        return [r for r in self._unwritten.get(root, ()) if r["path"] not in again]

    def written(self, root: str) -> None:
        """A scan's write went in with :meth:`unwritten`'s rows."""
        self._unwritten.pop(root, None)

    def check(
        self,
        db: Database,
        fs: FileSystem,
        root: str,
        now: datetime,
        sizes: Mapping[str, int],
    ) -> set[str]:
        """Check the files of ``sizes`` (path -> size as listed) and write a problem row for
        each damaged one; returns their paths (written or kept for the next write)."""
        rows: list[dict[str, Any]] = [
            {"checkpoint": root, "path": path, "kind": KIND, "message": why, "seen_at": now}
            for path, why in verify_files(fs, sizes)
        ]
        if not rows:
            return set()
        import duckdb

        try:
            db.record_problems(rows)
        except (CollectorError, duckdb.Error):
            # The rows are committed already: these join the next write instead.
            self._unwritten.setdefault(root, []).extend(rows)
        return {r["path"] for r in rows}
