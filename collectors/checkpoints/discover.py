"""Find the checkpoints under a folder or URL prefix: bounded, filtered, tolerant of bad entries.

A directory is a checkpoint when it holds ``offsets/`` or ``commits/``; the search does not
descend into one. It walks breadth first through the read-only
:class:`~collectors.fs.FileSystem`, so it reads local folders and object stores alike, and it
stops at a depth, a count or a time limit, whichever comes first. A directory that cannot be
listed (permission denied, a symlink loop) is skipped with one warning; the rest is searched.

Example::

    found = discover(LOCAL, "/data/checkpoints", Limits(max_depth=3), warn=print)
    for root in found.checkpoints: ...
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from stateglass.collectors.errors import CheckpointError, NotACheckpoint
from stateglass.collectors.fs import LOCAL, FileSystem

Warn = Callable[[str], None]
# (directories listed, checkpoints found so far)
Progress = Callable[[int, int], None]

CHECKPOINT_DIRS = frozenset({"offsets", "commits"})


@dataclass(frozen=True)
class Limits:
    """Bounds of one search, and the globs that filter it (matched against the path relative
    to the search root, or the directory's own name)."""

    max_depth: int = 6
    max_checkpoints: int = 1000
    max_seconds: float = 60.0
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # Resolved folders the search must stay inside (a symlink may point anywhere): the
    # dashboard's allowed roots. Empty: anywhere.
    within: tuple[str, ...] = ()
    # Folders listed at once: bounded, so that a search never floods an object store.
    concurrency: int = 16

    def allows(self, ident: str) -> bool:
        if not self.within or "://" in ident:
            return True
        return any(os.path.commonpath([ident, w]) == w for w in self.within if "://" not in w)

    def excluded(self, rel: str) -> bool:
        return _matches(rel, self.exclude)

    def included(self, rel: str) -> bool:
        return not self.include or _matches(rel, self.include)


def _matches(rel: str, globs: tuple[str, ...]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatchcase(rel, g) or fnmatchcase(name, g) for g in globs)


@dataclass(frozen=True)
class Found:
    """What one search found, and why it stopped early (None when it searched everything)."""

    checkpoints: tuple[str, ...]
    directories: int
    stopped: str | None
    # Directories left unsearched below the depth limit.
    too_deep: int = 0


def join(base: str, name: str) -> str:
    """``base/name`` for a local path or a URL (posix separators in both)."""
    return posixpath.join(base, name) if "://" in base else os.path.join(base, name)


def _local_entries(path: str, warn: Warn) -> list[tuple[str, bool]]:
    """A local directory's ``(name, is_dir)``, warning once per entry that cannot be read.

    ``LocalFileSystem.names`` drops such entries silently, which suits a scan but not a search
    the user should hear about (a symlink loop, a dangling mount).
    """
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except FileNotFoundError as exc:
        raise NotACheckpoint(path, "no such directory") from exc
    except OSError as exc:
        raise CheckpointError(path, f"cannot list ({exc.strerror or exc})") from exc
    out = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            is_dir = entry.is_dir()
            if is_dir and entry.is_symlink():
                os.stat(entry.path)  # a loop or a dangling link fails here, once
        except OSError as exc:
            warn(f"skipped {entry.path}: {exc.strerror or exc}")
            continue
        out.append((entry.name, is_dir))
    return out


def entries(fs: FileSystem, path: str, warn: Warn) -> list[tuple[str, bool]]:
    """``(name, is_dir)`` of each entry of ``path`` (hidden ones left out)."""
    if fs is LOCAL and "://" not in path:
        return _local_entries(path, warn)
    return [(n, d) for n, d in fs.names(path) if not n.startswith(".")]


def is_checkpoint(names: list[tuple[str, bool]]) -> bool:
    return any(is_dir and name in CHECKPOINT_DIRS for name, is_dir in names)


def _identity(path: str) -> str:
    # Symlinks can lead back to a folder already searched; object stores have no links.
    return path if "://" in path else os.path.realpath(path)


def discover(
    fs: FileSystem,
    root: str,
    limits: Limits | None = None,
    warn: Warn | None = None,
    progress: Progress | None = None,
) -> Found:
    """Checkpoints under ``root`` (not ``root`` itself), sorted, within ``limits``.

    Breadth first, one depth at a time: the folders of a depth are listed
    ``limits.concurrency`` at a time (an object store answers each LIST in tens of
    milliseconds, so hundreds of prefixes one by one take minutes), then judged in their
    sorted order, so what is found, warned and counted is what a serial walk gives.
    """
    limits = limits or Limits()
    say: Warn = warn or (lambda _line: None)
    root = root.rstrip("/") or "/"
    search = _Search(root, limits, time.monotonic() + limits.max_seconds)
    search.seen.add(_identity(root))
    level = [root]
    pool = ThreadPoolExecutor(max(1, limits.concurrency), "stateglass-discover")
    try:
        for depth in range(limits.max_depth + 1):
            if not level or search.stopped:
                break
            listings = pool.map(lambda path: _listing(fs, path), level)
            level = search.judge(level, listings, depth, say, progress)
    finally:
        # A search stopped at a limit does not wait for the rest of its depth's listings.
        pool.shutdown(wait=True, cancel_futures=True)
    return Found(tuple(sorted(search.found)), search.listed, search.stopped, search.too_deep)


def _listing(fs: FileSystem, path: str) -> tuple[list[tuple[str, bool]] | None, list[str]]:
    """A folder's entries (None if it cannot be listed) and the warnings that came with them,
    kept apart so that the walk, not the listing thread, says them in order."""
    said: list[str] = []
    try:
        return entries(fs, path, said.append), said
    except CheckpointError as exc:
        return None, [*said, f"skipped {exc}"]


@dataclass
class _Search:
    """What a search has found so far, and the folders it has seen."""

    root: str
    limits: Limits
    deadline: float
    found: list[str] = field(default_factory=list)
    listed: int = 0
    too_deep: int = 0
    stopped: str | None = None
    seen: set[str] = field(default_factory=set)

    def judge(
        self,
        level: list[str],
        listings: Iterable[tuple[list[tuple[str, bool]] | None, list[str]]],
        depth: int,
        say: Warn,
        progress: Progress | None,
    ) -> list[str]:
        """The folders of the next depth, from this depth's listings (in ``level``'s order)."""
        below: list[str] = []
        for path, (names, said) in zip(level, listings, strict=True):
            if time.monotonic() > self.deadline:
                self.stopped = f"time limit of {self.limits.max_seconds:g} s"
                break
            for line in said:
                say(line)
            if names is None:
                continue
            self.listed += 1
            if progress is not None:
                progress(self.listed, len(self.found))
            if path != self.root and is_checkpoint(names):
                self._found(path)
                if self.stopped:
                    break
                continue  # never search inside a checkpoint
            if depth >= self.limits.max_depth:
                self.too_deep += sum(1 for _, is_dir in names if is_dir)
                continue
            below += self._children(path, names)
        return below

    def _found(self, path: str) -> None:
        if self.limits.included(_relative(path, self.root)):
            self.found.append(path)
            if len(self.found) >= self.limits.max_checkpoints:
                self.stopped = f"limit of {self.limits.max_checkpoints} checkpoints"

    def _children(self, path: str, names: list[tuple[str, bool]]) -> list[str]:
        children = []
        for name, is_dir in sorted(names):
            if not is_dir:
                continue
            child = join(path, name)
            if self.limits.excluded(_relative(child, self.root)):
                continue
            ident = _identity(child)
            if ident in self.seen or not self.limits.allows(ident):
                continue
            self.seen.add(ident)
            children.append(child)
        return children


def _relative(path: str, root: str) -> str:
    return path[len(root) :].lstrip("/")


def checkpoints_at(
    fs: FileSystem,
    path: str,
    limits: Limits | None = None,
    warn: Warn | None = None,
    progress: Progress | None = None,
) -> list[str]:
    """The checkpoint at ``path``, or else the checkpoints found below it.

    Raises a one-line :class:`NotACheckpoint` when there are neither.
    """
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

    limits = limits or Limits()
    say: Warn = warn or (lambda _line: None)
    root = os.path.abspath(path) if fs is LOCAL and "://" not in path else path.rstrip("/")
    if not fs.exists(root):
        raise NotACheckpoint(root, "no such file or directory")
    if not fs.is_dir(root):
        raise NotACheckpoint(root, "is a file, not a checkpoint directory")
    names = entries(fs, root, lambda _line: None)  # discover() lists it again, and warns
    if is_checkpoint(names) or ("metadata", False) in names:
        return [Checkpoint.open(root, fs).root]
    found = discover(fs, root, limits, say, progress)
    if found.stopped:
        say(
            f"{root}: stopped searching at the {found.stopped}; "
            f"{len(found.checkpoints)} checkpoint(s) found so far"
        )
    if found.too_deep:
        say(
            f"{root}: {found.too_deep} folder(s) below depth {limits.max_depth} not searched "
            "(--max-depth)"
        )
    if not found.checkpoints:
        raise NotACheckpoint(
            root,
            "not a Structured Streaming checkpoint (no metadata, offsets/ or commits/ inside), "
            f"and none below it ({found.directories} folder(s) searched)",
        )
    return list(found.checkpoints)
