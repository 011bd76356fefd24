"""``collect --engine spark`` on a real standalone cluster: a master and two workers.

The executors run the base interpreter with the venv's site-packages on ``PYTHONPATH``: the
compiled dependencies are there, StateGlass is not (the probe proves it), so the code must
arrive the way the engine ships it. A decoy ``collectors`` package, imported into every Python
worker by a ``sitecustomize``, stands for another job's module with one of our folders' names:
under the ``stateglass`` namespace it cannot shadow ours, with no import guard.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stateglass.collectors.db.writer import Database
from stateglass.collectors.engines import LocalEngine
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.collectors.cluster import VENV_SITE, Cluster, free_port, spark_env
from tests.collectors.helpers import ROOT, TABLES, copy_sample, table

DECOY = Path(__file__).parent / "decoy"
STATEGLASS = str(Path(sys.executable).parent / "stateglass")
# RocksDB with changelogs and SSTs, and a join: four stores, HDFS-backed.
SAMPLES = ("spark-4.3/agg-rocks-cl", "spark-4.3/join-hdfs")

pytestmark = pytest.mark.slow


def _run(
    args: list[str], env: dict[str, str], timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def _collect(checkpoints: list[str], db: str, master: str) -> list[str]:
    return [
        STATEGLASS,
        "collect",
        *checkpoints,
        "--db",
        db,
        "--engine",
        "spark",
        "--master",
        master,
    ]


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def test_workers_have_the_dependencies_but_not_stateglass(
    spark_cluster: Cluster, tmp_path: Path
) -> None:
    env = spark_env(tmp_path / "conf", [str(DECOY), VENV_SITE])
    args = [sys.executable, "-m", "tests.collectors.cluster_probe"]
    proc = _run([*args, spark_cluster.master_url, str(DECOY)], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(seen) == 2
    for worker in seen:
        assert worker["python"] == os.path.realpath(sys.executable)
        # The decoy really is loaded in every Python worker before our tasks run...
        assert worker["held"] == str(DECOY / "collectors" / "__init__.py")
        # ...and StateGlass is not installed there: only the shipped zip brings it.
        assert worker["plain"] == "ModuleNotFoundError: No module named 'stateglass'"
        assert worker["lz4"] and worker["rocksdict"] and worker["zstandard"]


def test_collect_on_the_cluster_equals_the_local_engine(
    spark_cluster: Cluster, tmp_path: Path
) -> None:
    checkpoints = [str(copy_sample(name, tmp_path)) for name in SAMPLES]
    env = spark_env(tmp_path / "conf", [str(DECOY), VENV_SITE])
    db = str(tmp_path / "cluster.duckdb")
    started = time.monotonic()
    # The local engine's tables are made while the cluster's driver starts (seconds of JVM).
    cluster_run = subprocess.Popen(
        _collect(checkpoints, db, spark_cluster.master_url),
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        reference = Database(str(tmp_path / "local.duckdb"))
        for cp in checkpoints:
            scan_checkpoint(reference, cp, engine=LocalEngine())
        _, stderr = cluster_run.communicate(timeout=240)
    finally:
        if cluster_run.poll() is None:
            cluster_run.kill()
            cluster_run.wait()
    assert cluster_run.returncode == 0, stderr[-3000:]
    print(f"cluster collect: {time.monotonic() - started:.1f} s")
    versions = table(db, "state_versions")
    assert len(versions) > 50  # not empty-versus-empty
    for name in TABLES:
        assert table(db, name) == table(reference.path, name), name


def test_sql_on_the_cluster_equals_the_local_decode(spark_cluster: Cluster, tmp_path: Path) -> None:
    checkpoint = str(ROOT / "sample_checkpoints" / "spark-4.3" / "agg-rocks-cl")
    env = spark_env(tmp_path / "conf", [str(DECOY), VENV_SITE])
    sql = "SELECT * FROM agg_rocks_cl.op0_default WHERE batch_id IN (7, 11) ORDER BY ALL"
    base = [STATEGLASS, "sql", checkpoint, "--format", "jsonl", "-e", sql]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    on_cluster = subprocess.Popen(
        [
            *base,
            "--engine",
            "spark",
            "--master",
            spark_cluster.master_url,
            "--scratch",
            str(scratch),
            "--time-limit",
            "400",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        local = _run(base, env)
        out, err = on_cluster.communicate(timeout=400)
    finally:
        if on_cluster.poll() is None:
            on_cluster.kill()
            on_cluster.wait()
    assert on_cluster.returncode == 0, err[-3000:]
    assert local.returncode == 0, local.stderr[-3000:]
    assert len(local.stdout.splitlines()) > 10
    assert out == local.stdout
    assert list(scratch.iterdir()) == []  # the decoded Parquet is removed at exit


def test_executors_missing_a_compiled_dependency(spark_cluster: Cluster, tmp_path: Path) -> None:
    checkpoint = str(copy_sample("spark-4.3/agg-hdfs", tmp_path))
    # No site-packages on the executors: lz4 and friends are missing there (the decoy is).
    # One executor fails as every one would: the second would only start a JVM to no end.
    conf = {"spark.task.maxFailures": "1", "spark.cores.max": "1"}
    env = spark_env(tmp_path / "conf", [str(DECOY)], **conf)
    db = str(tmp_path / "sg.duckdb")
    proc = _run(
        _collect([checkpoint], db, spark_cluster.master_url),
        env,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    line = _last_line(proc.stderr)
    assert line.startswith(f"stateglass: error: {spark_cluster.master_url}: executor Python ")
    # Which compiled module is missing first depends on import order (lz4, xxhash, ...).
    assert " has no module '" in line, line
    assert "spark-engine.md" in line, line
    assert "Traceback" not in proc.stderr
    assert "[Stage" not in proc.stderr  # Spark's progress bar, drawn around our error
    assert table(db, "state_versions") == [] and table(db, "checkpoints") == []


def test_unreachable_master_fails_at_once(tmp_path: Path) -> None:
    checkpoint = str(copy_sample("spark-4.3/agg-hdfs", tmp_path))
    master = f"spark://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    proc = _run(
        _collect([checkpoint], str(tmp_path / "sg.duckdb"), master),
        spark_env(tmp_path / "conf", [VENV_SITE]),
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"stateglass: error: {master}: cannot reach the Spark master within 10 s "
        f"(127.0.0.1:{master.rsplit(':', 1)[1]}: Connection refused)"
    )
    assert time.monotonic() - started < 30
