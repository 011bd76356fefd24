"""Spark 3.5 judges ``stateglass rewrite``: the aggregation, dedup and join on both providers.

A Spark 3.5 interpreter (``$SPARK35_PYTHON``, default ``.venv35/bin/python``, which ``make test``
builds with ``pip install pyspark==3.5.9``) runs ``tests/rewrite/spark35_driver.py`` in a
subprocess: each query writes SRC (2 partitions) on one provider; StateGlass, in this
interpreter's venv, rewrites it to 3 partitions on the other provider; the query restarts on DST
and on an untouched copy of SRC with three more batches: the sink outputs must be equal. Spark 3.5
has no state reader, so Spark 4.3's (the suite's session) reads the state: DST right after the
rewrite holds SRC's rows, each in the partition of Spark's hash, and after the restarts DST and
the copy hold the same state. Without a 3.5 interpreter the test is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import JVM_OPTIONS, ROOT
from tests.rewrite.test_rewrite_spark import _rows, _spark_partitions

DRIVER = Path(__file__).with_name("spark35_driver.py")
PYTHON = os.environ.get("SPARK35_PYTHON", str(ROOT / ".venv35" / "bin" / "python"))
# Checked before any fixture, so that a skip starts no Spark session.
pytestmark = pytest.mark.skipif(
    not Path(PYTHON).exists(),
    reason=f"no Spark 3.5 interpreter at {PYTHON}: `make test` builds one (.venv35), or set "
    "SPARK35_PYTHON to the python of a venv with pyspark 3.5",
)
CASES = [f"{q}-{p}" for q in ("aggregation", "dedup", "join") for p in ("hdfs", "rocksdb")]


def _multiset(rows: list[tuple[str, str, str, int]]) -> list[tuple[str, str, str]]:
    return sorted((s, k, v) for s, k, v, _ in rows)


@pytest.fixture(scope="module")
def spark35(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java: install openjdk-17 to run the Spark oracle tests")
    work = tmp_path_factory.mktemp("rewrite-spark35")
    stateglass = str(Path(sys.executable).with_name("stateglass"))
    done = subprocess.run(
        [PYTHON, str(DRIVER), str(work), stateglass, JVM_OPTIONS],
        capture_output=True,
        text=True,
        # Spark 3.5's jars: the suite's class-data archive holds Spark 4.3's.
        env={**os.environ, "PYSPARK_PYTHON": PYTHON, "SPARK_SUBMIT_OPTS": JVM_OPTIONS},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["version"].startswith("3.5.")
    cases: dict[str, Any] = result["cases"]
    return cases


@pytest.mark.parametrize("case", CASES)
def test_spark35_restarts_on_the_rewrite_as_on_the_source(
    spark: Any, spark35: dict[str, Any], case: str
) -> None:
    found = spark35[case]
    assert found["rewrite"][0] == 0, found["rewrite"][1]
    home, query = Path(found["home"]), case.rsplit("-", 1)[0]
    src_rows = _rows(spark, query, home / "src")
    assert src_rows
    assert _multiset(_rows(spark, query, home / "rewritten")) == _multiset(src_rows)
    placed = _spark_partitions(spark, query, home / "rewritten", 3)
    assert placed and all(p == h for p, h in placed)
    assert found["dst_out"] and found["dst_out"] == found["ref_out"]
    after = _multiset(_rows(spark, query, home / "dst"))
    assert after == _multiset(_rows(spark, query, home / "ref")) != _multiset(src_rows)
