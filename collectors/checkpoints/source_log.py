"""A source's own log (``sources/<id>/``): which files each batch of a file source took, and
whether a source keeps a log at all.

A file source's offset is only a batch number of this log, so counting its input means
reading the log. The answer is for display: a checkpoint that cannot be read gives ``{}``.

Example::

    from stateglass.collectors.checkpoints.source_log import files_per_log_batch
    files_per_log_batch("/data/cp", "0")  # {0: 3, 1: 1, ...}
"""

from __future__ import annotations

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.errors import CollectorError
from stateglass.parsers.logs import batch_id_of, parse_file_source_log


def files_per_log_batch(checkpoint: str, source_id: str) -> dict[int, int]:
    """How many files the file source ``source_id`` took in each batch of its log.

    ``{}`` when the checkpoint or the log cannot be read, or the source is not a file source.
    """
    try:
        cp = Checkpoint.open(checkpoint)
        logs = sorted(
            (batch, info.name)
            for info in cp.list_dir("sources", source_id)
            if (batch := batch_id_of(info.name)) is not None
        )
        # A compact file repeats earlier batches' entries: keyed by path, each counts once.
        batch_of: dict[str, int] = {}
        for _, name in logs:
            for entry in cp.parse(cp.path("sources", source_id, name), parse_file_source_log):
                batch_of[entry.path] = entry.batch_id
    except (CollectorError, OSError):
        return {}
    counts: dict[int, int] = {}
    for batch in batch_of.values():
        counts[batch] = counts.get(batch, 0) + 1
    return counts


def keeps_log(checkpoint: str, source_id: str) -> bool:
    """Whether source ``source_id`` wrote a log under ``sources/<id>/``: of the sources whose
    offset is a bare number, the rate source does (its start time) and the socket and memory
    sources do not. False when the checkpoint cannot be read."""
    try:
        cp = Checkpoint.open(checkpoint)
        return any(batch_id_of(info.name) is not None for info in cp.list_dir("sources", source_id))
    except (CollectorError, OSError):
        return False
