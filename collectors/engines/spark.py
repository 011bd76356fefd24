"""The Spark engine: one Spark task per chain, results handed back to the one DuckDB writer.

Executors read the checkpoint themselves, so it must be at the same path on every executor
(the local disk with ``local[*]``, or a shared mount). Executors never write to the database.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from collectors.chains import ChainResult, ChainTask, compute_chain
from collectors.errors import UnsupportedCheckpoint
from collectors.fs import LOCAL, FileSystem

DEFAULT_MASTER = "local[*]"


def _session(master: str | None) -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise UnsupportedCheckpoint(
            "--engine spark", "pyspark is not installed: pip install pyspark (and a Java 17+ JDK)"
        ) from exc
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise UnsupportedCheckpoint(
            "--engine spark", "no Java found: install a JDK 17+ or set JAVA_HOME"
        )
    builder = SparkSession.builder.appName("stateglass-collect")
    if master or SparkSession.getActiveSession() is None:
        master = master or DEFAULT_MASTER
        builder = builder.master(master)
        if master.startswith("local"):
            # Local workers must run this interpreter: it has our parsers' dependencies.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return builder.getOrCreate()


def _run_partition(tasks: Iterator[ChainTask]) -> Iterator[ChainResult]:
    for task in tasks:
        yield compute_chain(task)


class SparkEngine:
    name = "spark"

    def __init__(self, master: str | None = None) -> None:
        self.master = master

    def run(self, tasks: Sequence[ChainTask], fs: FileSystem) -> Iterator[ChainResult]:
        if not tasks:
            return iter(())
        if fs is not LOCAL:
            raise UnsupportedCheckpoint(
                tasks[0].checkpoint,
                "the Spark engine reads only checkpoints on a local or mounted path",
            )
        sc = _session(self.master).sparkContext
        rdd = sc.parallelize(list(tasks), len(tasks))
        return iter(rdd.mapPartitions(_run_partition).collect())
