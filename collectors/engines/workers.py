"""Chains counted in forked worker processes: the local engine's ``--jobs N``.

Counting a chain is CPU-bound Python (decompression, key sets), so on a machine with N cores
the chains go to N forked processes. Workers only read and count: each hands back the versions
and problems of one chain, and the parent, where the scan (the only DuckDB writer) runs,
stores them. Tasks are not pickled: the workers inherit them with the fork.

Signals as for ``state --jobs`` (``app/parallel.py``): the workers are forked with the stop
signals blocked, die of SIGTERM/SIGHUP at once, and ignore SIGINT, which a terminal sends to
the whole process group: the parent alone turns it into ``KeyboardInterrupt`` and terminates
the pool. Their temporary files (RocksDB restore directories) go under one scratch directory
that the parent removes, whatever happened to them.

A remote file system cannot cross a fork (fsspec's async clients refuse to run in a child), so
each worker opens its own client on the same location (:meth:`~collectors.remote.objectfs.
ObjectFileSystem.for_worker`) and sends back the requests it made, which the parent adds to
its own counts.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from stateglass.collectors.engines.forked import ForkedPool
from stateglass.collectors.engines.signals import restore_default_signals
from stateglass.collectors.fs import FileSystem
from stateglass.collectors.scan.chains import (
    ChainProblem,
    ChainResult,
    ChainTask,
    VersionCount,
    compute_chain,
)

if TYPE_CHECKING:
    # Imported when workers run: `stateglass.collectors.remote` is not for free, and `collect` with
    # one job or few chains never needs it here.
    from stateglass.collectors.remote.objectfs import RequestCounts


@runtime_checkable
class ForkAware(Protocol):
    """A file system whose state cannot be used as such in a forked child."""

    def for_worker(self) -> Callable[[], FileSystem] | None:
        """Called in the parent: what a worker calls to get its own file system (None: this
        one cannot be used from a forked worker at all, so chains run in-process)."""
        ...


# fsspec's event loop thread (fsspec resets it in a forked child) and its loop's default
# executor (getaddrinfo, credential look-ups: idle between calls, never used by a worker).
_FORK_SAFE_THREADS = ("fsspecIO", "asyncio_")

# Set in the parent just before the fork; read by the workers.
_JOB: tuple[Sequence[ChainTask], Callable[[], FileSystem]] | None = None
_FS: FileSystem | None = None

Outcome = tuple[int, tuple[VersionCount, ...], tuple[ChainProblem, ...], "RequestCounts"]


def worker_opener(fs: FileSystem) -> Callable[[], FileSystem] | None:
    """How a worker gets its file system, or None when chains must stay in this process."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    others = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.name.startswith(_FORK_SAFE_THREADS)
    ]
    if others:
        # A fork copies only this thread: a lock another thread holds (a watcher's, a
        # server's) would stay held forever in the child. Watchers run chains in-process.
        return None
    if isinstance(fs, ForkAware):
        return fs.for_worker()
    return lambda: fs


def _start_worker(scratch: str) -> None:
    from stateglass.collectors.remote.objectfs import COUNTS

    restore_default_signals(ignored=(signal.SIGINT,))
    tempfile.tempdir = scratch
    COUNTS.reset()  # the parent's counts, inherited, are the parent's to report


def _count(index: int) -> Outcome:
    from stateglass.collectors.remote.objectfs import COUNTS, RequestCounts

    global _FS
    assert _JOB is not None
    if _FS is None:
        # Here, not in the initializer: a pool respawns a worker whose initializer failed,
        # forever; a task's exception reaches the parent instead.
        _FS = _JOB[1]()
    result = compute_chain(_JOB[0][index], _FS)
    counts = RequestCounts()
    counts.merge(COUNTS)
    COUNTS.reset()
    return index, result.versions, result.problems, counts


def _cost(task: ChainTask) -> int:
    return sum(f.size for f in task.files or ())


def run_in_workers(
    tasks: Sequence[ChainTask], opener: Callable[[], FileSystem], jobs: int
) -> Iterator[ChainResult]:
    """Every task's result, as workers finish them (biggest chains first, to even the load)."""
    from stateglass.collectors.remote.objectfs import COUNTS

    global _JOB
    scratch = tempfile.mkdtemp(prefix="stateglass-collect-")
    _JOB = (tasks, opener)
    order = sorted(range(len(tasks)), key=lambda i: (-_cost(tasks[i]), i))
    try:
        # SIGINT stays blocked too, and ignored in the workers: see restore_default_signals.
        with ForkedPool(
            tasks[0].checkpoint if tasks else "--jobs",
            jobs,
            initializer=_start_worker,
            initargs=(scratch,),
            blocked=(signal.SIGINT,),
        ) as pool:
            outcomes = pool.results(_count, order, ordered=False)
            for index, versions, problems, counts in outcomes:
                COUNTS.merge(counts)
                yield ChainResult(tasks[index], versions, problems)
    finally:
        _JOB = None
        shutil.rmtree(scratch, ignore_errors=True)


def cpu_count() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
