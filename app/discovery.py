"""Command-line side of checkpoint discovery: its flags, its progress line, its warnings.

``collect``, ``watch`` and ``dashboard`` accept checkpoints or folders (or URL prefixes) of
them; a folder is searched within the bounds given here (see
:mod:`stateglass.collectors.checkpoints.discover`).

Example::

    stateglass collect /data/checkpoints --max-depth 3 --exclude 'tmp*' --include 'prod/*'
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TextIO

from stateglass.collectors.checkpoints.discover import Limits, checkpoints_at
from stateglass.collectors.fs import FileSystem

DEFAULTS = Limits()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--max-depth``, ``--max-checkpoints``, ``--discovery-timeout``, ``--include/--exclude``."""
    g = p.add_argument_group("discovery (a PATH that is a folder of checkpoints)")
    g.add_argument(
        "--max-depth",
        type=int,
        default=DEFAULTS.max_depth,
        metavar="N",
        help=f"search N folder levels below PATH (default {DEFAULTS.max_depth})",
    )
    g.add_argument(
        "--max-checkpoints",
        type=int,
        default=DEFAULTS.max_checkpoints,
        metavar="N",
        help=f"stop after N checkpoints per PATH (default {DEFAULTS.max_checkpoints})",
    )
    g.add_argument(
        "--discovery-timeout",
        type=float,
        default=DEFAULTS.max_seconds,
        metavar="SECONDS",
        help=f"stop searching a PATH after this long (default {DEFAULTS.max_seconds:g})",
    )
    g.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="keep only checkpoints whose path below PATH, or name, matches (repeatable)",
    )
    g.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip folders whose path below PATH, or name, matches (repeatable)",
    )


def limits(args: argparse.Namespace) -> Limits:
    """The bounds in ``args`` (defaults for commands and tests that do not set them)."""
    return Limits(
        max_depth=getattr(args, "max_depth", DEFAULTS.max_depth),
        max_checkpoints=getattr(args, "max_checkpoints", DEFAULTS.max_checkpoints),
        max_seconds=getattr(args, "discovery_timeout", DEFAULTS.max_seconds),
        include=tuple(getattr(args, "include", None) or ()),
        exclude=tuple(getattr(args, "exclude", None) or ()),
    )


class SearchProgress:
    """``searching PATH: N folders, M checkpoints`` on stderr: redrawn in place on a terminal,
    else one line every few seconds, so a long search is never silent."""

    def __init__(self, path: str, stream: TextIO | None = None, every_s: float = 2.0) -> None:
        self.path = path
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = every_s
        self._next = time.monotonic() + every_s
        self._drawn = False
        self.shown = False

    def __call__(self, folders: int, found: int) -> None:
        now = time.monotonic()
        if now < self._next and not (self.tty and folders % 50 == 0):
            return
        self._next = now + (0.2 if self.tty else self.every_s)
        self.shown = True
        line = f"searching {self.path}: {folders} folders, {found} checkpoints"
        if self.tty:
            self.stream.write("\r" + line[-100:])
            self._drawn = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()


def warn(line: str) -> None:
    print(f"stateglass: warning: {line}", file=sys.stderr, flush=True)


def find(
    paths: list[str],
    args: argparse.Namespace,
    fs_for: Callable[[str], FileSystem] | None = None,
) -> list[str]:
    """Every checkpoint at or below ``paths``, each once, in order; warnings on stderr.

    ``fs_for(path)`` is the file system a path (or URL) is read through.
    """
    from stateglass.collectors.remote import canonical
    from stateglass.collectors.remote import fs_for as by_scheme

    fs_for = fs_for or by_scheme
    bounds = limits(args)
    out: dict[str, None] = {}
    for path in map(canonical, paths):  # never a user:password@ or token in a message
        progress = SearchProgress(path)
        try:
            roots = checkpoints_at(fs_for(path), path, bounds, warn, progress)
        finally:
            progress.done()
        if progress.shown:  # a search long enough to show progress ends with its result
            print(f"found {len(roots)} checkpoint(s) under {path}", file=sys.stderr, flush=True)
        out.update(dict.fromkeys(roots))
    return list(out)


def find_checkpoints(root: str, max_depth: int = 4) -> list[str]:
    """The checkpoint at local ``root``, or those below it, quietly (no progress, no
    warnings); none when there are neither."""
    from stateglass.collectors.errors import NotACheckpoint
    from stateglass.collectors.fs import LOCAL

    try:
        return checkpoints_at(LOCAL, root, Limits(max_depth=max_depth))
    except NotACheckpoint:
        return []
