"""One real query with Spark 4.3's event-log defaults, run beside the suite from the moment it
is collected (tests/prebuild.py), when a test of this folder is selected."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tests.prebuild import Prebuild


def _no_java() -> bool:
    return shutil.which("java") is None and not os.environ.get("JAVA_HOME")


def _run_progress_query(directory: Path, environment: dict[str, str]) -> Path:
    out = directory / "run"
    env = dict(environment, PYSPARK_PYTHON=sys.executable)
    argv = ["--out", str(out), "--listener", "--restart", "--batches", "3"]
    done = subprocess.run(
        [sys.executable, str(SAMPLES / "progress_query.py"), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


PROGRESS_RUN = Prebuild(Path(__file__).parent, _run_progress_query)


def pytest_collection_finish(session: pytest.Session) -> None:
    if not _no_java():
        PROGRESS_RUN.start_if_needed(session)


def pytest_sessionfinish(session: pytest.Session) -> None:
    PROGRESS_RUN.close()


@pytest.fixture(scope="session")
def progress_run() -> Path:
    """One real query with Spark 4.3's event-log defaults (rolling, zstd) and the StateGlass
    listener, restarted once (two runs): ``checkpoint/``, ``eventlog/``, ``listener/`` and
    ``recent_progress.json`` (see sample_checkpoints/progress_query.py). Its own Spark
    process: event logging is a SparkContext setting the shared ``spark`` session lacks."""
    if _no_java():
        pytest.skip("no Java: install openjdk-17 to run the Spark progress tests")
    return PROGRESS_RUN.result()
