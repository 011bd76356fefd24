"""A small leaking query for growth attribution: anonymous sessions bring the new keys.

``groupBy(customer_id, device, window(ts, 1 hour))`` without a watermark over JSON files, one
file per batch: three known customers come back on the same devices in the first hour
(updates), and rows with ``customer_id = null`` come from a fresh device each, in batch N's
hour (new keys, more every batch).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

BATCHES = 6
PARTITIONS = 4


def write_input(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for batch in range(BATCHES):
        rows = [
            {"customer_id": f"c{c}", "device": f"d{c}", "ts": f"2024-01-01T00:{batch:02d}:00Z"}
            for c in range(3)
        ]
        rows += [
            {
                "customer_id": None,
                "device": f"anon-{batch}-{i}",
                "ts": f"2024-01-01T{batch:02d}:30:00Z",
            }
            for i in range(2 + 2 * batch)
        ]
        # One registered customer on a new device now and then: not only nulls are new.
        if batch % 2:
            rows.append(
                {"customer_id": "c9", "device": f"new-{batch}", "ts": "2024-01-01T01:10:00Z"}
            )
        path = folder / f"{batch:03d}.json"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        # The file source takes files oldest first, and files written in the same second tie:
        # distinct mtimes make file N batch N.
        os.utime(path, (1_700_000_000 + batch, 1_700_000_000 + batch))


def run(spark: Any, root: Path) -> Path:
    """Run the query to completion (one batch per file); return its checkpoint."""
    from pyspark.sql import functions as F

    source, checkpoint = root / "input", root / "checkpoint"
    write_input(source)
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(PARTITIONS))
    try:
        stream = (
            spark.readStream.schema("customer_id string, device string, ts timestamp")
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .groupBy("customer_id", "device", F.window("ts", "1 hour"))
            .agg(F.count("*").alias("events"))
        )
        query = (
            stream.writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        query.stop()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    return checkpoint
