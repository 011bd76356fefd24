"""Render the JSON lines of many partitions in worker processes, written in partition order.

Decoding is CPU-bound Python, so partitions go to a pool of forked processes (one per core).
Workers inherit the opened checkpoint and the generated encoders, read and render one
partition each, and hand back its text; the parent writes the texts in partition order, so
the output is the same as a serial run.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence

from app.output import JsonLinesSink
from collectors.state import StateSource

# Set in the parent just before the fork; read by the workers.
_JOB: tuple[StateSource, JsonLinesSink, int] | None = None


def _render(partition: int) -> tuple[str, int]:
    assert _JOB is not None
    source, sink, version = _JOB
    with source.decoding(partition):
        lines = sink.render_partition(partition, source.reader(partition).load(version))
    # One string pickles far faster than a list of a million small ones.
    lines.append("")
    return "\n".join(lines), len(lines) - 1


def default_jobs(partitions: int) -> int:
    return max(1, min(os.cpu_count() or 1, partitions))


def can_parallelize(sink: object, partitions: Sequence[int], jobs: int) -> bool:
    return (
        jobs > 1
        and len(partitions) > 1
        and isinstance(sink, JsonLinesSink)
        and sink.fast
        and "fork" in multiprocessing.get_all_start_methods()
    )


def write_state_parallel(source: StateSource, sink: JsonLinesSink, version: int, jobs: int) -> None:
    """Every partition of ``source`` at ``version`` through ``sink``, ``jobs`` at a time."""
    global _JOB
    _JOB = (source, sink, version)
    try:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(processes=jobs) as pool:
            for text, rows in pool.imap(_render, source.partitions):
                sink.write_text(text, rows)
    finally:
        _JOB = None
