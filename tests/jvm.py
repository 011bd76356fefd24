"""The suite's JVMs: their options, and a class-data archive of Spark's classes that they share.

A run starts some thirty JVMs on Spark 4.3's jars (each worker's SparkSession, the ``stateglass``
commands and probes that go through spark-submit, the standalone cluster's master, workers and
executors). Each loads and verifies the same ~15,000 classes from the jars before it runs a
query: half the CPU of a short one. Java's class-data sharing maps them ready-made from an
archive instead. The archive is made at the start of a run from what is installed (JDK 17
dumps the classes a JVM loaded when it exits, ``-XX:ArchiveClassesAtExit``), once per Java and
pyspark install, in the temporary directory; the JVMs started before it is ready run without.

Usage, by the suite (``tests/conftest.py``)::

    start_archive()                  # in pytest's main process, at the start of the run
    options = jvm_options()          # for a JVM about to start on Spark 4.3's jars
    wait_for_archive()               # at the end: no child outlives the run
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# The JVMs the suite starts (its SparkSession, Spark 3.5's driver, the standalone cluster) run
# many short queries, each with freshly generated classes, and few long loops: C2's compiles
# cost more CPU than the code they speed up, and a 2-core machine has none to spare (a third
# of a session's CPU). C1 alone reserves a 48 MB code cache by default, which a session's
# generated code fills: Spark then fails tasks ("Out of space in CodeCache for method handle
# intrinsic"), so the cache gets the tiered default back. The serial collector leaves the
# cores to the tests: the heaps are small.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
# Spark 4.3's settings for the suite's sessions, each cutting CPU that the tests do not need.
# Spark's default checkpoint manager writes through Hadoop's FileContext, which (with no native
# Hadoop library) runs `readlink` or `chmod` in a child process of the JVM for most files it
# creates or renames on a local disk: a third of a rewrite oracle's CPU. The FileSystem manager
# writes the same files, .crc sidecars included, by the same write-to-temp-then-rename steps,
# and forks far less. Whole-stage code generation compiles each micro-batch's plan with Janino,
# which costs more than running the few rows a test's batch holds; it changes no result.
SPARK_CONF = {
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
    ),
    "spark.sql.codegen.wholeStage": "false",
}
# A JVM whose classpath or Java differs from the archive's (Spark 3.5's driver, say) runs
# without it, and would say so on its stdout, where some tests read a command's output.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

_builder: subprocess.Popen[bytes] | None = None


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


@functools.cache
def archive_path() -> Path | None:
    """Where this Java and pyspark's archive lives (named by what it was made from), or None
    without Java or pyspark."""
    import importlib.util

    java = _java()
    spec = importlib.util.find_spec("pyspark")
    if java is None or spec is None or spec.origin is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    # The JVM rejects an archive whose jars or Java changed; a new name makes a new one.
    made_from = [str(java), java.stat().st_mtime_ns, JVM_OPTIONS, str(jars)]
    made_from += sorted((p.name, p.stat().st_size) for p in jars.glob("*.jar"))
    key = hashlib.sha256(json.dumps(made_from).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"stateglass-jvm-{key}.jsa"


def jvm_options() -> str:
    """:data:`JVM_OPTIONS`, with the archive once it is made."""
    archive = archive_path()
    if archive is None or not archive.exists():
        return JVM_OPTIONS
    return f"{JVM_OPTIONS} -XX:SharedArchiveFile={archive} {QUIET}"


def start_archive() -> None:
    """Make the archive in a child process unless it exists or another run is making it."""
    global _builder
    archive = archive_path()
    if archive is None or archive.exists() or _builder is not None:
        return
    lock = archive.with_suffix(".lock")
    try:
        # Another run making the same archive holds the lock; a lock left by a run that was
        # killed is older than any build takes.
        if lock.exists() and lock.stat().st_mtime < _now() - 600:
            lock.unlink()
        lock.touch(exist_ok=False)
    except OSError:
        return
    _builder = subprocess.Popen(
        [sys.executable, __file__, str(archive), str(lock)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )


def session_builder(name: str, java_options: str) -> Any:
    """A local SparkSession's builder with the suite's settings (two cores and two shuffle
    partitions, UTC, no UI, :data:`SPARK_CONF`) and these JVM options."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName(name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", java_options)
        .config(map=SPARK_CONF)
    )


def wait_for_archive() -> None:
    if _builder is not None:
        _builder.wait()


def _now() -> float:
    import time

    return time.time()


def _build(archive: Path, lock: Path) -> None:
    """A session with the suite's settings runs what the tests run most (stateful streaming
    queries on both state stores, state reads, Python batches), so that the archive holds
    their classes; its JVM writes the archive when it exits."""
    from pyspark.sql import functions as F

    work = Path(tempfile.mkdtemp(prefix="stateglass-jvm-"))
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    try:
        dump = f"{JVM_OPTIONS} -XX:ArchiveClassesAtExit={partial}"
        session = session_builder("stateglass-jvm-archive", dump).getOrCreate()
        source = work / "in"
        source.mkdir()
        for n in range(2):
            rows = [{"k": f"k{i % 5}", "id": n * 10 + i} for i in range(10)]
            (source / f"{n}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        stores = {
            "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
            "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        }
        for name, provider in stores.items():
            session.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
            events = session.readStream.schema("k STRING, id BIGINT").json(str(source))
            counts = events.groupBy("k").agg(F.count("*").alias("c"), F.sum("id").alias("s"))
            checkpoint = work / name
            counts.writeStream.outputMode("update").foreachBatch(
                lambda frame, _: frame.collect()
            ).option("checkpointLocation", str(checkpoint)).trigger(
                availableNow=True
            ).start().awaitTermination()
            session.read.format("statestore").load(str(checkpoint)).collect()
        session.createDataFrame([(1, "a")], "n INT, s STRING").toPandas()
        gateway = session.sparkContext._gateway
        session.stop()
        # The JVM exits when its stdin closes and writes the archive as it does.
        if gateway is not None and gateway.proc is not None:
            gateway.proc.stdin.close()
            gateway.proc.wait(timeout=300)
        if partial.exists():
            partial.rename(archive)
    finally:
        partial.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    _build(Path(sys.argv[1]), Path(sys.argv[2]))
