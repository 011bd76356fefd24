"""Output files appear whole or not at all, and SIGTERM/SIGHUP unwind like Ctrl+C.

Every command that writes a file (``state -o``, ``changes -o``, ``report -o``, ``export -o``)
writes it under a temporary name beside the target and renames it into place only when
everything was written: a failure (or a signal) half-way leaves the target as it was and no
temporary file. :func:`signals_unwind` turns SIGTERM and SIGHUP into
:class:`Terminated`, a ``KeyboardInterrupt``, so every ``finally`` and ``with`` that cleans up
after Ctrl+C (RocksDB restore directories, worker scratch directories) runs for them too.

Example::

    with replacing("/out/report.html") as tmp:
        write_report(tmp)          # an exception here leaves /out/report.html untouched
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import uuid
from collections.abc import Iterator
from types import FrameType
from typing import IO

# The helpers around forked workers live with the collectors, which fork them too.
from stateglass.collectors.engines.signals import CLEAN_EXIT_SIGNALS, restore_default_signals


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived; unwinds like Ctrl+C. ``signum`` gives the exit status."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def signals_unwind() -> Iterator[None]:
    """Inside the block, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only; the
    previous handlers come back after it, so calling ``main()`` in-process changes nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_terminated) for sig in CLEAN_EXIT_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def temp_name(path: str) -> str:
    """A hidden name beside ``path`` (same directory, so the final rename is atomic)."""
    head, tail = os.path.split(os.path.abspath(path))
    return os.path.join(head, f".{tail}.{uuid.uuid4().hex[:12]}.stateglass-tmp")


def _discard(tmp: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)


@contextlib.contextmanager
def replacing(path: str) -> Iterator[str]:
    """Yield a temporary path to write; rename it to ``path`` when the block succeeds."""
    tmp = temp_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


class AtomicText:
    """A text file written under a temporary name; :meth:`commit` renames it into place."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.tmp = temp_name(path)
        # "x": never follow or reuse something already at the temporary name.
        self.file: IO[str] = open(self.tmp, "x", encoding="utf-8", newline="\n")  # noqa: SIM115

    def commit(self) -> None:
        try:
            self.file.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            _discard(self.tmp)
            raise

    def discard(self) -> None:
        try:
            self.file.close()
        finally:
            _discard(self.tmp)


__all__ = [
    "AtomicText",
    "Terminated",
    "replacing",
    "restore_default_signals",
    "signals_unwind",
    "temp_name",
]
