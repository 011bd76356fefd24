"""``collect --jobs 2`` on S3: each forked worker opens its own client on the same
location (fsspec's clients cannot cross a fork); the tables and the request counts are those
of ``--jobs 1``. The collects run as processes: this one runs moto's server in a thread, and
a process with other threads keeps its chains in-process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.collectors.helpers import all_tables
from tests.conftest import ROOT
from tests.remote.conftest import S3


@pytest.mark.slow
def test_collect_jobs_2_matches_jobs_1(s3: S3, tmp_path: Path) -> None:
    url = s3.url("spark-4.3/join-hdfs")  # four stores: sixteen chains
    runs = {}
    # Each run has its own database and cache: side by side, they take the slower one's time,
    # and each still downloads every file, so their counts compare.
    for jobs in ("1", "2"):
        db = tmp_path / f"jobs{jobs}.duckdb"
        env = {**os.environ, "STATEGLASS_CACHE_DIR": str(tmp_path / f"cache{jobs}")}
        cmd = [sys.executable, "-m", "stateglass.app.cli", "collect", url, "--db", str(db)]
        runs[jobs] = subprocess.Popen(
            [*cmd, "--jobs", jobs, "--verbose"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
    tables, requests = {}, {}
    try:
        for jobs, proc in runs.items():
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
            lines = err.splitlines()
            assert ("(partitions counted in 2 worker processes)" in lines[0]) == (jobs == "2")
            requests[jobs] = [line for line in lines if "requests:" in line]
            tables[jobs] = all_tables(str(tmp_path / f"jobs{jobs}.duckdb"))
    finally:
        for proc in runs.values():
            if proc.poll() is None:  # timed out, or an assertion above failed first
                proc.kill()
                proc.wait()
    assert tables["2"] == tables["1"]
    assert tables["1"]["state_versions"]
    # The workers' GETs are counted: the same requests as one process makes.
    assert requests["2"] == requests["1"] and "GET" in requests["1"][0]
