"""A transformWithState query whose value state has a TTL, run for the tests that show its
expirations (Spark keeps them as epoch milliseconds: ``ttlExpirationMs``)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import spark_conf, write_batch_files

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CONF = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
}
# An hour: every value is still alive when the test reads it.
TTL_MS = 3_600_000
STATE_VAR = "seen"


def _processor() -> Any:
    """A processor counting rows per key in a value state with a TTL (pyspark imported late)."""
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Counter(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.seen = handle.getValueState(STATE_VAR, "n LONG", TTL_MS)

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Any:
            (n,) = self.seen.get() if self.seen.exists() else (0,)
            n += sum(len(pdf) for pdf in rows)
            self.seen.update((n,))
            yield pd.DataFrame({"k": [key[0]], "n": [n]})

        def close(self) -> None:
            pass

    return Counter()


def ttl_query(spark: Any, base: Path) -> Path:
    """Three batches of four keys each through the processor; the checkpoint's path."""
    batches = [[{"k": f"k{i % 4}", "v": b * 10 + i} for i in range(6)] for b in range(3)]
    src = write_batch_files(base / "src", batches)
    stream = spark.readStream.schema("k STRING, v LONG").option("maxFilesPerTrigger", 1)
    with warnings.catch_warnings():
        # PySpark 4.3 warns about pandas 3 on every pandas UDF; the pinned pandas is 3.x.
        warnings.filterwarnings(
            "ignore", "PySpark does not yet fully support pandas", FutureWarning
        )
        counted = (
            stream.json(str(src))
            .groupBy("k")
            .transformWithStateInPandas(
                _processor(), "k STRING, n LONG", "Update", "ProcessingTime"
            )
        )
    cp = base / "tws-ttl"
    # No-data batches off: a processing-time TTL would have availableNow run them on and on.
    with spark_conf(spark, CONF):
        query = (
            counted.writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
            .start()
        )
    query.awaitTermination()
    return cp
