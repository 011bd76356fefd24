"""Find checkpoints under a directory and summarize them for listings."""

from __future__ import annotations

import os

from collectors.checkpoint import Checkpoint
from collectors.errors import CollectorError


def find_checkpoints(root: str, max_depth: int = 4) -> list[str]:
    """Directories under ``root`` that look like checkpoints (they hold offsets/ or commits/)."""
    found: list[str] = []
    root = os.path.abspath(root)
    base_depth = root.rstrip(os.sep).count(os.sep)
    for dirpath, dirnames, _ in os.walk(root):
        if {"offsets", "commits"} & set(dirnames):
            found.append(dirpath)
            dirnames[:] = []  # do not descend into a checkpoint
            continue
        if dirpath.count(os.sep) - base_depth >= max_depth:
            dirnames[:] = []
        dirnames.sort()
    return sorted(found)


def summarize(path: str) -> dict[str, object]:
    """One listing row for the checkpoint at ``path``; problems become the ``problem`` column."""
    row: dict[str, object] = {"checkpoint": path}
    try:
        cp = Checkpoint.open(path)
        row.update(
            query_id=cp.query_id,
            last_committed_batch=cp.last_committed_batch,
            operators=", ".join(
                f"{s.operator_id}:{s.operator_name}/{s.store_name} ({s.provider})"
                for s in cp.stores()
            ),
            problem="",
        )
    except CollectorError as exc:
        row["problem"] = str(exc)
    return row
