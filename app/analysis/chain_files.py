"""The live state files of each store partition, by version and kind, and which of them
cannot be read: the problems a scan filed, the SSTs a zip references and lacks.

The health rules (holes, retention, damaged files, the restart verdict) and the restart cost
read them. Apart from :mod:`stateglass.app.analysis.health` so that a page drawing the
restart cost does not load the rules.

Example::

    chains = chain_files(history)          # a rule's Context, or any HistoryRows
    files = chains[(0, "default", 3)]
    print(sorted(files.full), sorted(files.unopenable()))
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from stateglass.collectors.scan.checksums import KIND as CHECKSUM_KIND
from stateglass.collectors.scan.checksums import data_block_mismatch
from stateglass.collectors.stores import CHANGE_KINDS, FULL_KINDS


class HistoryRows(Protocol):
    """Rows of one checkpoint's history (a rule's :class:`Context`, or a page's query)."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql``; its first ``?`` is the checkpoint, ``params`` fill the others."""
        ...


@dataclass
class ChainFiles:
    """The versions of one store partition that have a live (not purged) file, by kind."""

    change: set[int] = field(default_factory=set)
    full: set[int] = field(default_factory=set)
    # Versions whose change / full file is in the problems table (unreadable or corrupt).
    bad_change: set[int] = field(default_factory=set)
    bad_full: set[int] = field(default_factory=set)
    # Full versions (also in bad_full) whose zip loads but references an SST with a damaged
    # data block: RocksDB opens the table and fails the first read of that block, so Spark's
    # load succeeds and its automatic snapshot repair never runs.
    failing_reads: set[int] = field(default_factory=set)

    def unopenable(self) -> set[int]:
        """Snapshot versions Spark cannot open, which its automatic repair skips (a zip
        whose SSTs fail only at a read opens)."""
        return self.bad_full - self.failing_reads

    def readable(self) -> set[int]:
        """Versions a load can actually read; see :func:`readable`."""
        return readable(self.change, self.full, self.bad_change, self.bad_full)


def readable(
    change: Collection[int],
    full: Collection[int],
    bad_change: Collection[int] = (),
    bad_full: Collection[int] = (),
) -> set[int]:
    """Versions a load can read when the ``bad_*`` files cannot be decoded.

    Like our readers (and Spark without its automatic snapshot repair, see
    :mod:`stateglass.collectors.checkpoints.load_rule`), a load starts from the newest
    snapshot at or below V and does not fall back to an older one: a bad snapshot breaks its
    version and every version built on it, a bad delta or changelog every version up to the
    next good snapshot.
    """
    present = set(change) | set(full)
    if not present:
        return set()
    out = set()
    lo, hi = min(present), max(present)
    ok = lo == 1  # version 0 (the empty store) is always there
    for v in range(lo, hi + 1):
        ok = v not in bad_full if v in full else ok and v in change and v not in bad_change
        if ok:
            out.add(v)
    return out


# A problem's path names the file that failed; an SST or a zip's inner metadata stands for
# the zip that references it (the messages of collectors/stores/rocksdb.py name that zip).
_ZIP_IN_MESSAGE = re.compile(r"(?:referenced by|recorded in) (\S+\.zip)")


def problem_file(path: str, message: str) -> str:
    """The state file (path) a problem row is about."""
    path = path.split("!", 1)[0]
    found = _ZIP_IN_MESSAGE.search(message)
    if found and "/SSTs/" in path:
        return path.rsplit("/SSTs/", 1)[0] + "/" + found.group(1)
    return path


def bad_state_files(history: HistoryRows) -> dict[str, list[tuple[str, str]]]:
    """State-file path -> ``(kind, message)`` of its problems."""
    out: dict[str, list[tuple[str, str]]] = {}
    for path, kind, message in history.rows(
        "SELECT path, kind, message FROM problems WHERE checkpoint = ? ORDER BY path, kind"
    ):
        out.setdefault(problem_file(path, message), []).append((kind, message))
    return out


def _read_failure(problems: Collection[tuple[str, str]]) -> bool:
    """An SST whose only damage is a data block's checksum: RocksDB opens it (the footer,
    index and meta blocks are whole) and fails when a read reaches that block."""
    return bool(problems) and all(
        kind == CHECKSUM_KIND and data_block_mismatch(message) for kind, message in problems
    )


Versions = dict[tuple[int, str, int], set[int]]


def _bad_ssts(
    history: HistoryRows, bad: dict[str, list[tuple[str, str]]]
) -> tuple[Versions, Versions]:
    """Versions whose zip references an SST that is gone or has a problem of its own (a
    checksum mismatch): RocksDB cannot use that zip, and a scan that did not read the zip
    (its key count is in its metadata) would not have noticed. Second: those of them whose
    only damage is in data blocks (see :func:`_read_failure`)."""
    by_name = {p.rsplit("/SSTs/", 1)[1]: found for p, found in bad.items() if "/SSTs/" in p}
    out: Versions = {}
    reads: Versions = {}
    loads: Versions = {}
    for op, store, part, first, last, name, missing in history.rows(
        "SELECT r.operator_id, r.store_name, r.partition_id, r.first_version, r.last_version, "
        "r.sst_file, f.path IS NULL "
        "FROM sst_refs r LEFT JOIN state_files f ON f.checkpoint = r.checkpoint "
        "AND f.operator_id = r.operator_id AND f.store_name = r.store_name "
        "AND f.partition_id = r.partition_id AND f.kind = 'sst' AND NOT f.purged "
        "AND f.path LIKE '%/SSTs/' || r.sst_file "
        "WHERE r.checkpoint = ? AND (f.path IS NULL OR list_contains(?::VARCHAR[], r.sst_file))",
        [sorted(by_name)],
    ):
        versions = set(range(first, last + 1))
        out.setdefault((op, store, part), set()).update(versions)
        read_only = not missing and _read_failure(by_name.get(name, ()))
        (reads if read_only else loads).setdefault((op, store, part), set()).update(versions)
    # A version fails only at a read when every bad SST it references does.
    for chain, versions in reads.items():
        versions -= loads.get(chain, set())
    return out, reads


def chain_files(history: HistoryRows) -> dict[tuple[int, str, int], ChainFiles]:
    """``(operator, store, partition) -> ChainFiles`` of the live files in ``history``."""
    out: dict[tuple[int, str, int], ChainFiles] = {}
    bad = bad_state_files(history)
    bad_ssts, failing_reads = _bad_ssts(history, bad)
    for op, store, part, version, kind, path in history.rows(
        "SELECT operator_id, store_name, partition_id, version, kind, path FROM state_files "
        "WHERE checkpoint = ? AND NOT purged AND version IS NOT NULL"
    ):
        files = out.setdefault((op, store, part), ChainFiles())
        if kind in CHANGE_KINDS:
            files.change.add(version)
            if path in bad:
                files.bad_change.add(version)
        elif kind in FULL_KINDS:
            files.full.add(version)
            if path in bad or version in bad_ssts.get((op, store, part), ()):
                files.bad_full.add(version)
            if path not in bad and version in failing_reads.get((op, store, part), ()):
                files.failing_reads.add(version)
    return out
