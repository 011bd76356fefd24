"""Find checkpoints under a directory and summarize them for listings."""

from __future__ import annotations

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.errors import CollectorError


def find_checkpoints(root: str, max_depth: int = 4) -> list[str]:
    """The checkpoint at ``root``, or those below it (bounded search, see
    :mod:`stateglass.collectors.checkpoints.discover`); none when there are neither."""
    from stateglass.collectors.checkpoints.discover import Limits, checkpoints_at
    from stateglass.collectors.errors import NotACheckpoint
    from stateglass.collectors.fs import LOCAL

    try:
        return checkpoints_at(LOCAL, root, Limits(max_depth=max_depth))
    except NotACheckpoint:
        return []


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
