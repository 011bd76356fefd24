"""The DynamoDB state store provider for real queries: build its jar, load it, run queries.

The provider (``java/stateglass/dynamo``) is compiled with ``javac`` against PySpark's own
jars into a temporary directory (nothing built is committed), loaded into a running local
session, and used by two real queries whose state then lives in DynamoDB: the tests run them
against moto's DynamoDB server on loopback, ``demo.py generate`` for the sample.

Example::

    load_jar(spark, build_jar(tmp))
    with provider_confs(spark, endpoint, "agg"):
        query = run_aggregation(spark, write_batches(src, aggregation_batches()), checkpoint)
    query.awaitTermination()
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SOURCES = Path(__file__).resolve().parent / "java"
PROVIDER_CLASS = "stateglass.dynamo.DynamoStateStoreProvider"
CONF_PREFIX = "spark.sql.streaming.stateStore.dynamodb."


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def build_jar(out: Path) -> Path:
    """Compile the provider into ``out/stateglass-dynamo.jar`` and return its path."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError(
            "no javac: install a JDK (openjdk-17-jdk-headless) to build the provider"
        )
    classes = out / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    sources = sorted(str(p) for p in SOURCES.rglob("*.java"))
    cp = str(pyspark_jars() / "*")
    subprocess.run(
        [javac, "-nowarn", "-d", str(classes), "-cp", cp, *sources],
        check=True,
        capture_output=True,
    )
    jar = out / "stateglass-dynamo.jar"
    with zipfile.ZipFile(jar, "w") as zf:
        for path in sorted(classes.rglob("*.class")):
            zf.write(path, path.relative_to(classes).as_posix())
    return jar


def load_jar(spark: object, jar: Path) -> None:
    """Make the provider loadable in a running local session.

    ``addJar`` ships it to the executors (their class loader picks it up at the next task);
    the driver, which creates a provider to learn its metrics when a query plans, looks
    classes up through the calling thread's context class loader, so this thread's gets a
    child loader with the jar. A streaming query's thread inherits it when it starts.
    """
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    spark.sparkContext._jsc.addJar(str(jar))  # type: ignore[attr-defined]
    thread = jvm.java.lang.Thread.currentThread()
    parent = thread.getContextClassLoader()
    urls = spark.sparkContext._gateway.new_array(jvm.java.net.URL, 1)  # type: ignore[attr-defined]
    urls[0] = jvm.java.io.File(str(jar)).toURI().toURL()
    thread.setContextClassLoader(jvm.java.net.URLClassLoader(urls, parent))


# Snapshot groups of 3 versions, so that a short query writes the snapshot table.
GROUP_SIZE = 3
TIMEOUT_MS = 3 * 60_000


def write_batches(src: Path, batches: list[list[dict[str, Any]]]) -> Path:
    """One JSON-lines file per batch, each a second newer (the order Spark reads them in)."""
    src.mkdir(parents=True, exist_ok=True)
    for n, rows in enumerate(batches):
        path = src / f"{n:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))
    return src


def aggregation_batches(count: int = 5) -> list[list[dict[str, Any]]]:
    """Batches over 12 keys (the sample has five): every batch updates some keys and adds
    new ones. Four already reach a version after the first snapshot group."""
    return [
        [{"k": f"k{(b * 5 + i) % 12:02d}", "v": b * 10 + i} for i in range(6 + b)]
        for b in range(count)
    ]


def session_batches(count: int = 5) -> list[list[dict[str, Any]]]:
    """Batches of user events; users stop after a while, so their state times out (the
    first user's in the fourth batch)."""
    out = []
    for b in range(count):
        minute = b * 2
        users = [f"u{u}" for u in range(b, b + 4)]
        out.append(
            [
                {"user": u, "amount": 1.5 * (b + i), "ts": f"2026-01-01T00:{minute:02d}:{i:02d}Z"}
                for i, u in enumerate(users)
            ]
        )
    return out


@contextmanager
def provider_confs(spark: Any, endpoint: str, table_prefix: str) -> Iterator[None]:
    """Session confs for one query start on the DynamoDB provider; restored after."""
    conf = {
        "spark.sql.streaming.stateStore.providerClass": PROVIDER_CLASS,
        CONF_PREFIX + "endpoint": endpoint,
        CONF_PREFIX + "tablePrefix": table_prefix,
        CONF_PREFIX + "snapshotGroupSize": str(GROUP_SIZE),
        "spark.sql.shuffle.partitions": "2",
    }
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _start(df: Any, checkpoint: Path, mode: str) -> Any:
    return (
        df.writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def run_aggregation(spark: Any, src: Path, checkpoint: Path) -> Any:
    """groupBy(k).agg(count, sum): one state row per key, updated by later batches. Returns
    the started query (``awaitTermination()`` to let it finish)."""
    from pyspark.sql import functions as F

    df = spark.readStream.schema("k string, v long").option("maxFilesPerTrigger", 1).json(str(src))
    return _start(
        df.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total")),
        checkpoint,
        "update",
    )


def track(key: tuple[str], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
    """Running count and total per user, removed TIMEOUT_MS of event time after its last event."""
    import pandas as pd

    (user,) = key
    if state.hasTimedOut:
        state.remove()
        yield pd.DataFrame([(user, "expired")], columns=["user", "status"])
        return
    events, total, last = state.get if state.exists else (0, 0.0, 0)
    for pdf in pdfs:
        events += len(pdf)
        total += float(pdf["amount"].sum())
        last = max(last, int(pdf["ts"].max().value // 1_000_000))
    state.update((events, total, last))
    state.setTimeoutTimestamp(max(last + TIMEOUT_MS, state.getCurrentWatermarkMs() + 1))
    yield pd.DataFrame([(user, "active")], columns=["user", "status"])


def run_with_state(spark: Any, src: Path, checkpoint: Path) -> Any:
    """applyInPandasWithState (PySpark's flatMapGroupsWithState) with an event-time timeout;
    the started query."""
    from pyspark import cloudpickle
    from pyspark.sql.streaming.state import GroupStateTimeout

    # This module is loaded from a file, not installed: the workers get ``track`` by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with warnings.catch_warnings():
        # PySpark 4.3 warns that it predates pandas 3; the query runs the same.
        warnings.filterwarnings("ignore", "PySpark does not yet fully support", FutureWarning)
        df = (
            spark.readStream.schema("user string, amount double, ts timestamp")
            .option("maxFilesPerTrigger", 1)
            .json(str(src))
            .withWatermark("ts", "1 minute")
            .groupBy("user")
            .applyInPandasWithState(
                track,
                "user string, status string",
                "events long, total double, last long",
                "update",
                GroupStateTimeout.EventTimeTimeout,
            )
        )
    return _start(df, checkpoint, "update")
