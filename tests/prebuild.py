"""Set-ups that run beside the suite: started as soon as the suite is collected, if a selected
test needs them (on xdist workers, when the first of them asks), and waited for by the fixture
that hands them out.

Only work done in child processes belongs here (the wheel and its virtualenv, a Spark query
in its own JVM): the thread that waits on a child holds no lock the tests need, so the
set-up's minutes pass while the tests collected before its own run. One worker runs the jobs
one after another, so the suite never has more than one of them beside it. A job gets the
environment as it was when the suite was collected: a test that sets a variable for itself
meanwhile must not reach it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Generic, TypeVar

import pytest

T = TypeVar("T")
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prebuild")


class Prebuild(Generic[T]):
    """``build(directory, environment)``, run once beside the tests, for the tests under
    ``folder``.

    The folder's conftest calls :meth:`start_if_needed` from ``pytest_collection_finish``
    and :meth:`close` from ``pytest_sessionfinish``; its fixture calls :meth:`result`.
    """

    def __init__(self, folder: Path, build: Callable[[Path, dict[str, str]], T]) -> None:
        self.folder = folder
        self.build = build
        self._future: Future[T] | None = None
        self._directory: Path | None = None
        self._environment: dict[str, str] | None = None

    def start(self) -> None:
        if self._future is None:
            self._directory = Path(tempfile.mkdtemp(prefix=f"stateglass-{self.folder.name}-"))
            environment = self._environment or dict(os.environ)
            self._future = _WORKER.submit(self.build, self._directory, environment)

    def start_if_needed(self, session: pytest.Session) -> None:
        """Start if a selected test lies under ``folder`` and the tests are to run."""
        if session.config.option.collectonly:
            return
        if not any(self.folder in Path(item.path).parents for item in session.items):
            return
        self._environment = dict(os.environ)
        # Every xdist worker collects every test, but only the one given the folder's tests
        # needs the build (they are one file, and `--dist loadfile` keeps a file on one
        # worker): it starts there when they ask.
        if not os.environ.get("PYTEST_XDIST_WORKER"):
            self.start()

    def result(self) -> T:
        """What ``build`` returned, or its error; started now if nothing started it yet."""
        self.start()
        assert self._future is not None
        return self._future.result()

    def close(self) -> None:
        """Wait for a build still running (a child process must not outlive the suite), then
        remove its directory. An error was the fixture's to report."""
        if self._future is not None:
            self._future.exception()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
