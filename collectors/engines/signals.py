"""Signals around forked worker processes (``collect --jobs``, ``state --jobs``).

The parent forks its workers with the stop signals blocked (:func:`signals_blocked`), and each
worker resets them (:func:`restore_default_signals`) before it unblocks them: a signal that
arrived in between stays pending and is then delivered with the default action. Otherwise a
worker could inherit the parent's Python handler, swallow the signal, and the pool's
``terminate`` would wait forever for a worker that never died.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Sequence

# Signals that mean "stop now" and that Python would otherwise die of without unwinding.
CLEAN_EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def restore_default_signals(ignored: Sequence[signal.Signals] = ()) -> None:
    """For worker processes: die at once on a stop signal; the parent removes their scratch.

    ``ignored`` signals (``SIGINT`` for collect's workers) are left to the parent: Ctrl+C in a
    terminal reaches the whole process group, and the parent alone decides to stop the pool.
    """
    for sig in ignored:
        signal.signal(sig, signal.SIG_IGN)
    for sig in CLEAN_EXIT_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (*CLEAN_EXIT_SIGNALS, *ignored))


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """For a worker that writes: the kernel kills it with SIGKILL when ``parent`` dies
    (Linux's ``PR_SET_PDEATHSIG``), so no worker writes on after a killed run; a worker
    whose parent is already gone exits. Where there is no ``prctl``, nothing changes."""
    # Only rewrite's writers ask: every command imports this module, few need ctypes.
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # died before the request was made
        os._exit(1)


@contextlib.contextmanager
def signals_blocked(extra: Sequence[signal.Signals] = ()) -> Iterator[None]:
    """Hold SIGTERM, SIGHUP and ``extra`` pending in this thread (and in processes it forks)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, (*CLEAN_EXIT_SIGNALS, *extra))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
