"""Session fixtures: the real queries of ``tests/progress_queries.py``, each run once per test
session on the shared ``spark`` fixture, only when a test asks for one (the file-source
queries side by side, the rate-source ones side by side); and a helper that puts
a run (checkpoint and progress events) into a fresh database."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests import progress_queries as pq
from tests.progress_rows import write_events


def collect_run(
    db_path: Path | str, ran: pq.Ran, events: list[dict[str, Any]] | None = None
) -> str:
    """Collect the run's checkpoint, and its progress events (the listener's way, from a
    fresh directory beside the database); the checkpoint's root."""
    summary = scan_checkpoint(Database(str(db_path)), str(ran.checkpoint))
    directory = Path(db_path).parent / f"progress-{ran.checkpoint.name}-{len(str(db_path))}"
    shutil.rmtree(directory, ignore_errors=True)
    write_events(str(db_path), ran.events if events is None else events, str(directory))
    return summary.checkpoint


@pytest.fixture(scope="session")
def progress_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("progress-queries")


@pytest.fixture(scope="session")
def file_source_runs(spark: Any, progress_base: Path) -> dict[str, pq.Ran]:
    """The four file-source queries, run side by side once when a test first asks for one:
    four sequential runs cost the suite as much again in driver round trips."""
    return pq.file_source_runs(spark, progress_base)


@pytest.fixture(scope="session")
def steady_run(file_source_runs: dict[str, pq.Ran]) -> pq.Ran:
    return file_source_runs["steady"]


@pytest.fixture(scope="session")
def late_run(file_source_runs: dict[str, pq.Ran]) -> pq.Ran:
    return file_source_runs["late"]


@pytest.fixture(scope="session")
def growing_run(file_source_runs: dict[str, pq.Ran]) -> pq.Ran:
    return file_source_runs["growing"]


@pytest.fixture(scope="session")
def compacting_run(file_source_runs: dict[str, pq.Ran]) -> pq.Ran:
    return file_source_runs["compacting"]


@pytest.fixture(scope="session")
def rate_runs(spark: Any, progress_base: Path) -> tuple[pq.Ran, pq.Ran]:
    """The falling-behind and keeping-up queries, run side by side (both wait on the clock)."""
    return pq.falling_behind_and_keeping_up(spark, progress_base)


@pytest.fixture(scope="session")
def behind_run(rate_runs: tuple[pq.Ran, pq.Ran]) -> pq.Ran:
    return rate_runs[0]


@pytest.fixture(scope="session")
def keeping_up_run(rate_runs: tuple[pq.Ran, pq.Ran]) -> pq.Ran:
    return rate_runs[1]
