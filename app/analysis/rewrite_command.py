"""The ``stateglass rewrite`` command lines the planner and the health findings suggest.

Kept apart from :mod:`.rewrite` (which reads state and loads the writers) so that a finding
can name the command without importing a RocksDB.
"""

from __future__ import annotations

import shlex


def rewrite_command(
    checkpoint: str,
    *,
    partitions: int | None = None,
    provider: str | None = None,
    drop_keys: tuple[tuple[str, str], ...] = (),
    batch_id: int | None = None,
) -> str:
    """The dry run of ``stateglass rewrite`` for a change, with a destination named after it
    beside the source (``--apply`` writes it). ``drop_keys``: ``(store, predicate)`` pairs,
    the store as ``stateglass state`` names it (``0/default``)."""
    args, suffix = [], []
    if partitions is not None:
        args += ["--partitions", str(partitions)]
        suffix.append(f"{partitions}p")
    if provider is not None:
        args += ["--provider", provider]
        suffix.append(provider)
    if batch_id is not None:
        args += ["--batch-id", str(batch_id)]
        suffix.append(f"at-{batch_id}")
    for store, predicate in drop_keys:
        args += ["--drop-keys", store, predicate]
    if drop_keys:
        suffix.append("dropped")
    dst = f"{checkpoint.rstrip('/')}-{'-'.join(suffix) or 'rewritten'}"
    args = ["stateglass", "rewrite", checkpoint, dst, *args]
    return shlex.join(args)


def rocksdb_move_hint(checkpoint: str) -> str:
    """What a finding the HDFS-backed provider causes suggests: the same state on RocksDB."""
    return (
        "The HDFS-backed provider keeps a store's whole state in executor memory and rewrites "
        "it in full at each snapshot; RocksDB keeps it on local disk. stateglass rewrite "
        "writes a new checkpoint with this state on RocksDB, which the query restarts on "
        "(it prints its plan; add --apply to write): "
        + rewrite_command(checkpoint, provider="rocksdb")
    )
