"""Output files appear whole or not at all, and SIGTERM/SIGHUP unwind like Ctrl+C.

Every command that writes a file (``state -o``, ``changes -o``, ``report -o``, ``export -o``)
writes it under a temporary name beside the target and renames it into place only when
everything was written: a failure (or a signal) half-way leaves the target as it was and no
temporary file. A target that is not a regular file (``-o /dev/null``, ``/dev/stdout``, a pipe)
is written into at the end instead, as a shell redirect would: renaming onto it would replace
the device. :func:`signals_unwind` turns SIGTERM and SIGHUP into
:class:`Terminated`, a ``KeyboardInterrupt``, so every ``finally`` and ``with`` that cleans up
after Ctrl+C (RocksDB restore directories, worker scratch directories) runs for them too.

Example::

    with replacing("/out/report.html") as tmp:
        write_report(tmp)          # an exception here leaves /out/report.html untouched
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import tempfile
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


def interrupted_query(exc: BaseException) -> bool:
    """Whether ``exc`` is DuckDB's own word for a Ctrl+C (or a stop signal) that landed inside
    a query: it stops the query and raises this instead of the KeyboardInterrupt."""
    return type(exc).__name__ == "InterruptException" or (
        isinstance(exc, RuntimeError) and str(exc) == "Query interrupted"
    )


@contextlib.contextmanager
def signals_unwind() -> Iterator[None]:
    """Inside the block, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only; the
    previous handlers come back after it, so calling ``main()`` in-process changes nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def raise_terminated(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, raise_terminated) for sig in CLEAN_EXIT_SIGNALS}
    try:
        yield
    except Exception as exc:
        # DuckDB checks for signals mid-query, swallows the Terminated and says "interrupted":
        # the signal that stopped it is still the command's exit status and line.
        if received and interrupted_query(exc):
            raise Terminated(received[-1]) from exc
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_stop(stop: threading.Event) -> Iterator[list[int]]:
    """Inside the block, the first SIGTERM or SIGHUP sets ``stop`` and a second one raises
    :class:`Terminated`; yields the signals received (main thread only, as
    :func:`signals_unwind`).

    For loops that run until stopped (``watch``): they end between two pieces of work, where
    nothing is half-done, rather than unwinding from wherever the signal lands (inside a thread
    being started, inside a library). A second signal stops a scan that is taking too long.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def request_stop(signum: int, frame: FrameType | None) -> None:
        if received:
            raise Terminated(signum)
        received.append(signum)
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in CLEAN_EXIT_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _not_a_file(path: str) -> bool:
    """``path`` exists and is not a regular file: ``/dev/null``, ``/dev/stdout``, a FIFO. A
    rename would replace the device itself (as root, /dev/null becomes a plain file)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def temp_name(path: str) -> str:
    """A hidden name beside ``path`` (same directory, so the final rename is atomic); in the
    temporary directory for a target that is not a regular file (nothing is renamed onto it)."""
    head, tail = os.path.split(os.path.abspath(path))
    if _not_a_file(path):
        head = tempfile.gettempdir()
    return os.path.join(head, f".{tail}.{uuid.uuid4().hex[:12]}.stateglass-tmp")


def put_in_place(tmp: str, path: str) -> None:
    """Make the finished ``tmp`` the content of ``path``: a rename, or, for a target that is
    not a regular file, a copy into it, as a shell redirect would write."""
    if not _not_a_file(path):
        os.replace(tmp, path)
        return
    try:
        with open(tmp, "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
    finally:
        _discard(tmp)


def _discard(tmp: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)


@contextlib.contextmanager
def replacing(path: str) -> Iterator[str]:
    """Yield a temporary path to write; rename it to ``path`` when the block succeeds."""
    tmp = temp_name(path)
    try:
        yield tmp
        put_in_place(tmp, path)
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
            put_in_place(self.tmp, self.path)
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
    "put_in_place",
    "replacing",
    "restore_default_signals",
    "signals_unwind",
    "temp_name",
]
