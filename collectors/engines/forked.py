"""A pool of forked worker processes that stops when one of them is killed.

``multiprocessing.Pool`` replaces a worker that dies without a word (SIGKILL, the kernel's
out-of-memory killer) but loses the task that worker held, so the parent waits for that result
forever; and a worker killed while it held the pool's task-queue lock leaves even
``Pool.terminate`` waiting for that lock. ``concurrent.futures.ProcessPoolExecutor`` watches
its workers' sentinels instead: one that dies breaks the pool, every pending result fails at
once, and the executor kills the others itself. :class:`ForkedPool` turns that into one
:class:`~stateglass.collectors.errors.EngineError` naming the worker and how it died; the
caller's ``finally`` removes its scratch directory as on any other failure.

Signals as :mod:`stateglass.collectors.engines.signals` describes: workers are forked with the stop
signals blocked and restore the defaults themselves.

Example::

    with ForkedPool(where, jobs, initializer=restore_default_signals) as pool:
        for result in pool.results(render, partitions):
            write(result)
"""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any, TypeVar

from stateglass.collectors.engines.signals import signals_blocked
from stateglass.collectors.errors import EngineError

T = TypeVar("T")
R = TypeVar("R")


def _nothing(_: None) -> None:
    return None


class ForkedPool:
    """``jobs`` forked workers; :meth:`results` raises ``EngineError`` if one of them dies."""

    def __init__(
        self,
        where: str,
        jobs: int,
        initializer: Callable[..., None],
        initargs: Sequence[Any] = (),
        blocked: Sequence[signal.Signals] = (),
    ) -> None:
        self.where = where
        self.jobs = jobs
        self._blocked = blocked
        self._executor = concurrent.futures.ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=multiprocessing.get_context("fork"),
            initializer=initializer,
            initargs=tuple(initargs),
        )
        self._workers: list[BaseProcess] = []

    def __enter__(self) -> ForkedPool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is not None:
            # Stopped early (an error, a signal, Ctrl+C): workers may be mid-task, blocked on a
            # file; they die of SIGTERM at once, and the executor then sees its pool broken.
            for worker in self._workers:
                if worker.exitcode is None:
                    worker.terminate()
        self._executor.shutdown(wait=True, cancel_futures=True)

    def start(self) -> None:
        """Fork every worker now, as the first task would: while this process has opened
        nothing a fork does not carry (RocksDB's background threads, which a forked
        database would wait for forever)."""
        for _ in self.results(_nothing, [None]):
            pass

    def results(
        self, fn: Callable[[T], R], items: Iterable[T], ordered: bool = True
    ) -> Iterator[R]:
        """``fn`` of every item, in order (or as they finish when not ``ordered``)."""
        futures = self._submit_all(fn, items)
        done = futures if ordered else concurrent.futures.as_completed(futures)
        try:
            for future in done:
                yield future.result()
        except BrokenProcessPool as exc:
            raise EngineError(self.where, self._death()) from exc
        except Exception:
            # A task failed: the others are cancelled, and those running finish before the
            # caller cleans up after them (a worker still writing would outlive the cleanup).
            for future in futures:
                future.cancel()
            concurrent.futures.wait(futures)
            raise

    def _submit_all(
        self, fn: Callable[[T], R], items: Iterable[T]
    ) -> list[concurrent.futures.Future[R]]:
        before = set(multiprocessing.active_children())
        # The first submit forks every worker: with the stop signals held, and the objects
        # they inherit kept out of their collector (a collection there would touch, and so
        # copy, pages of the parent's heap).
        gc.freeze()
        try:
            with signals_blocked(extra=self._blocked):
                futures = [self._executor.submit(fn, item) for item in items]
        finally:
            gc.unfreeze()
        self._workers += [p for p in multiprocessing.active_children() if p not in before]
        return futures

    def _death(self) -> str:
        """Which worker died and how: the executor SIGTERMs the others once one is gone."""
        # Its manager thread reaps the workers: once it is done, every exit status is set
        # (read while it reaps, a status can still look unset).
        self._executor.shutdown(wait=True, cancel_futures=True)
        codes = [(w.pid, w.exitcode) for w in self._workers if w.exitcode is not None]
        first = [c for c in codes if c[1] != -signal.SIGTERM] or codes
        if not first:
            return "a worker process died; stopped, try fewer --jobs"
        pid, code = first[0]
        if code < 0 and -code == signal.SIGKILL:
            return (
                f"a worker process ({pid}) was killed by SIGKILL, perhaps by the kernel for "
                "want of memory; stopped, try fewer --jobs"
            )
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
        return f"a worker process ({pid}) was {how}; stopped"
