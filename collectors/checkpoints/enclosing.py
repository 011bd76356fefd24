"""Is this path inside a checkpoint? The one answer for ``-o``, ``--db`` and ``--progress``.

StateGlass never writes into a checkpoint directory, and never reads foreign files there as
event logs. A path is inside a checkpoint when it is one, or lies below one, that is either

- one of the ``known`` roots (local paths compared after resolving symlinks on both sides,
  URLs in their canonical spelling), or
- any directory on the way up laid out as a checkpoint: the ``metadata`` file Spark writes
  first when a query starts, beside ``offsets/``, ``commits/`` or ``state/`` (a checkpoint
  whose logs are gone). A project folder that merely has a ``commits/`` folder is not one.
  This finds the checkpoints nobody named, on the path's own file system: local, or behind
  a URL.

A local path is never inside a remote checkpoint, nor a URL inside a local one.

Every command refuses such a path the same way, before it writes anything:
:func:`refuse_inside_checkpoint`.

Example::

    root = enclosing_checkpoint("/data/cps/orders/state/out.jsonl")
    assert root == "/data/cps/orders"
    refuse_inside_checkpoint("/data/cps/orders/sg.duckdb", "--db")  # raises InsideCheckpoint
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from stateglass.collectors.checkpoints.discover import is_checkpoint
from stateglass.collectors.errors import CheckpointError, InsideCheckpoint
from stateglass.collectors.fs import LOCAL, FileSystem
from stateglass.collectors.remote.urls import is_url


def enclosing_checkpoint(
    path: str, known: Iterable[str] = (), fs: FileSystem | None = None
) -> str | None:
    """The checkpoint ``path`` is or lies in: a ``known`` root as given, or the directory
    found by its layout; None when there is none. ``fs`` reads ``path`` (default: the file
    system its scheme names)."""
    if is_url(path):
        # Only a URL pays for the remote layer's imports.
        from stateglass.collectors.remote import canonical, fs_for

        url = canonical(path)
        for root in known:
            if is_url(root) and _under(url, canonical(root)):
                return root
        return _by_layout(fs or fs_for(url), _url_ancestors(url))
    real = os.path.realpath(os.path.expanduser(path))
    for root in known:
        if not is_url(root) and _under(real, os.path.realpath(os.path.expanduser(root))):
            return root
    return _by_layout(fs or LOCAL, _local_ancestors(real))


def refuse_inside_checkpoint(
    path: str, option: str, known: Iterable[str] = (), fs: FileSystem | None = None
) -> None:
    """Raise :class:`InsideCheckpoint` when ``path``, given as ``option`` (``--db``, ``-o``,
    ``--progress``), is or lies in a checkpoint (``known`` and ``fs`` as for
    :func:`enclosing_checkpoint`)."""
    inside = enclosing_checkpoint(path, known, fs)
    if inside is not None:
        raise InsideCheckpoint(
            path,
            f"is inside the checkpoint {inside}; {option} takes a path outside every "
            "checkpoint (StateGlass never writes into one, nor reads event logs from one)",
        )


def _under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root.endswith("/") else root + "/")


def _local_ancestors(real: str) -> Iterator[str]:
    current = real
    while True:
        yield current
        parent = os.path.dirname(current)
        if parent == current:
            return
        current = parent


def _url_ancestors(url: str) -> Iterator[str]:
    """``s3://b/x/y``, ``s3://b/x``, ``s3://b``: up to the bucket (container, name node)."""
    scheme, rest = url.split("://", 1)
    parts = rest.rstrip("/").split("/")
    for end in range(len(parts), 0, -1):
        yield f"{scheme}://{'/'.join(parts[:end])}"


def _by_layout(fs: FileSystem, directories: Iterable[str]) -> str | None:
    for directory in directories:
        try:
            names = fs.names(directory)
        except CheckpointError:
            # Missing, a file, or not ours to list (mode 711): no checkpoint we could know.
            continue
        if ("metadata", False) in names and (is_checkpoint(names) or ("state", True) in names):
            return directory
    return None
