"""The local engine: chains in this process, or in ``jobs`` forked workers, one partition each.

``jobs=1`` counts the chains one after the other in this process. ``jobs=N`` hands them to N
forked worker processes (:mod:`stateglass.collectors.engines.workers`) that only read and count; the
results, stored by the scan in this process, are the same either way. ``jobs=0`` means one
worker per core, and in-process when the chains are too small to repay the fork.

Example::

    scan_checkpoint(Database("sg.duckdb"), "/data/checkpoints/orders", LocalEngine(jobs=0))
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from stateglass.collectors.engines.workers import cpu_count, run_in_workers, worker_opener
from stateglass.collectors.fs import FileSystem
from stateglass.collectors.scan.chains import ChainResult, ChainTask, compute_chain

# With ``jobs=0`` (one per core), chains whose files add up to less stay in-process: starting
# the workers costs tens of milliseconds, which a few kilobytes of deltas never repay.
AUTO_MIN_BYTES = 4 << 20


class LocalEngine:
    name = "local"
    carries_keys = True

    def __init__(self, jobs: int = 1) -> None:
        if jobs < 0:
            raise ValueError(f"jobs must be 0 (one per core) or more, not {jobs}")
        self.jobs = jobs
        # How many worker processes the last run used (0: it ran in this process).
        self.last_workers = 0

    def _workers(self, tasks: Sequence[ChainTask]) -> int:
        if self.jobs == 0:
            if sum(f.size for t in tasks for f in t.files or ()) < AUTO_MIN_BYTES:
                return 0
            return min(cpu_count(), len(tasks))
        return min(self.jobs, len(tasks))

    def run(self, tasks: Sequence[ChainTask], fs: FileSystem) -> Iterator[ChainResult]:
        workers = self._workers(tasks)
        opener = worker_opener(fs) if workers > 1 else None
        self.last_workers = workers if opener is not None else 0
        if opener is None:
            for task in tasks:
                yield compute_chain(task, fs)
            return
        # Key sets stay in this process: pickling them to workers would cost what they save.
        bare = [replace(t, seed=None, keep_tail=False) for t in tasks]
        yield from run_in_workers(bare, opener, workers)
