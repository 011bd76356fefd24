"""Render the JSON lines of many partitions in worker processes, written in partition order.

Decoding is CPU-bound Python, so partitions go to a pool of forked processes (one per core).
Workers inherit the opened checkpoint and the generated encoders, read and render one
partition each, and hand back its text; the parent writes the texts in partition order, so
the output is the same as a serial run.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
from collections.abc import Sequence

from stateglass.app.output import JsonLinesSink
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.engines.forked import ForkedPool
from stateglass.collectors.engines.signals import restore_default_signals

# Set in the parent just before the fork; read by the workers.
_JOB: tuple[StateSource, JsonLinesSink, int, str] | None = None


def _render(partition: int) -> tuple[str, int]:
    """Render one partition into a file of the private scratch directory: (its path, rows)."""
    assert _JOB is not None
    source, sink, version, scratch = _JOB
    with source.decoding(partition):
        blob, rows = sink.render_state_partition(source, partition, version)
    # A file, not the text itself: pickling tens of MB through a pipe costs more than the
    # parent splicing the file into the output.
    path = os.path.join(scratch, f"partition-{partition}.jsonl")
    with open(path, "wb") as fh:
        fh.write(blob)
    return path, rows


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
    # When one partition fails the pool is terminated, and SIGTERM skips the workers' own
    # cleanup: their RocksDB copies and output go under one directory that the parent removes.
    scratch = tempfile.mkdtemp(prefix="stateglass-jobs-")
    _JOB = (source, sink, version, scratch)
    saved_tempdir, tempfile.tempdir = tempfile.tempdir, scratch
    try:
        with ForkedPool(source.cp.root, jobs, initializer=restore_default_signals) as pool:
            for path, rows in pool.results(_render, source.partitions):
                sink.write_file(path, rows)
                os.unlink(path)
    finally:
        _JOB = None
        tempfile.tempdir = saved_tempdir
        shutil.rmtree(scratch, ignore_errors=True)
