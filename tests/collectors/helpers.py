"""Shared helpers of the collector tests: sample checkpoints, a counting file system, tables."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from stateglass.collectors.db.read import read_query
from stateglass.collectors.fs import LOCAL, FileInfo
from tests.conftest import ROOT, SAMPLES, copy_checkpoint, sample_checkpoints, sample_id

__all__ = ["ROOT", "SAMPLES", "sample_id"]
sample_paths = sample_checkpoints
# Columns that record when a scan ran, not what it found.
CLOCK_COLUMNS = {"first_seen", "last_scan", "seen_at", "purged_at"}
TABLES = ("checkpoints", "batches", "operators", "state_files", "state_versions", "problems")


def copy_sample(name: str, target: Path) -> Path:
    """A private copy of ``sample_checkpoints/<name>`` (tests that change files use it)."""
    return copy_checkpoint(SAMPLES / name, target / name.replace("/", "-"))


class CountingFileSystem:
    """The local disk, recording every path read (a fake in the style of our FileSystem)."""

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.stats: list[str] = []

    def list(self, path: str) -> list[FileInfo]:
        return LOCAL.list(path)

    def names(self, path: str) -> list[tuple[str, bool]]:
        return LOCAL.names(path)

    def stat(self, path: str) -> FileInfo | None:
        self.stats.append(path)
        return LOCAL.stat(path)

    def read(self, path: str) -> bytes:
        self.reads.append(path)
        return LOCAL.read(path)

    def exists(self, path: str) -> bool:
        return LOCAL.exists(path)

    def is_dir(self, path: str) -> bool:
        return LOCAL.is_dir(path)


class ListingFileSystem:
    """The local disk through the FileSystem protocol (not ``LOCAL``, so callers take the path
    a URL takes), recording each directory listed (what a LIST request would be)."""

    def __init__(self) -> None:
        self.listed: list[str] = []

    def list(self, path: str) -> list[FileInfo]:
        self.listed.append(path)
        return LOCAL.list(path)

    def names(self, path: str) -> list[tuple[str, bool]]:
        self.listed.append(path)
        return LOCAL.names(path)

    def stat(self, path: str) -> FileInfo | None:
        return LOCAL.stat(path)

    def read(self, path: str) -> bytes:
        return LOCAL.read(path)

    def exists(self, path: str) -> bool:
        return LOCAL.exists(path)

    def is_dir(self, path: str) -> bool:
        return LOCAL.is_dir(path)


def tree_digest(root: Path | str) -> dict[str, tuple[str, float]]:
    """sha256 and mtime of every file under ``root`` (symlinks not followed)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            out[os.path.relpath(path, root)] = (digest, os.lstat(path).st_mtime)
    return out


def table(db_path: str, name: str, checkpoint_prefix: str | None = None) -> list[tuple[Any, ...]]:
    """Every row of a table without the clock columns, sorted, checkpoint paths made relative."""
    cols = [r[0] for r in read_query(db_path, f"DESCRIBE {name}") if r[0] not in CLOCK_COLUMNS]
    rows = read_query(db_path, f"SELECT {', '.join(cols)} FROM {name}")
    out = []
    for row in rows:
        fixed = []
        for value in row:
            if isinstance(value, str) and checkpoint_prefix and value.startswith(checkpoint_prefix):
                value = value[len(checkpoint_prefix) :]
            fixed.append(value)
        out.append(tuple(fixed))
    return sorted(out, key=repr)


# ---- every table of a database, for `collect --jobs` parity -------------------------------
WALL_CLOCK_COLUMNS = CLOCK_COLUMNS | {"last_seen"}


def all_tables(
    db_path: str, checkpoint_prefix: str | None = None
) -> dict[str, list[tuple[Any, ...]]]:
    """Every base table of the database with every row, ordered; wall-clock columns left out
    (and ``checkpoint_prefix`` cut from the paths, as :func:`table` does)."""
    out = {}
    for (name,) in read_query(
        db_path,
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
        "ORDER BY table_name",
    ):
        cols = [r[0] for r in read_query(db_path, f"DESCRIBE {name}")]
        kept = [c for c in cols if c not in WALL_CLOCK_COLUMNS]
        rows = read_query(db_path, f"SELECT {', '.join(kept)} FROM {name}")
        if checkpoint_prefix:
            rows = [
                tuple(
                    v[len(checkpoint_prefix) :]
                    if isinstance(v, str) and v.startswith(checkpoint_prefix)
                    else v
                    for v in row
                )
                for row in rows
            ]
        out[name] = sorted(rows, key=repr)
    return out
