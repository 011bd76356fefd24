"""Write ``avro_golden.json``: raw Avro-encoded state rows plus the JSON Spark prints for them.

Not a test; run by hand with PySpark (4.3.0, Java 17) when the Avro rules need re-checking::

    .venv/bin/python tests/parsers/data/make_avro_golden.py

A ``transformWithStateInPandas`` query with ``spark.sql.streaming.stateStore.encodingFormat
=avro`` keeps a value state of every type Spark's Avro state encoder accepts (tinyint,
smallint, char/varchar and intervals make it fail at start-up), a list state and a map
state. The State Data Source then reads the checkpoint back in a fresh JVM, as JSON. The raw
RocksDB keys and values come from the last snapshot of each partition, restored and read
with ``rocksdict``; the v3 schema file travels along so the test parses it as a reader
would. ``test_avro.py`` checks that RowCodec plus the JSON renderer reproduce every line.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "parsers"))

from rocksdb_restore import open_read_only, restore  # noqa: E402

from stateglass.parsers.rocksdb_zip import RocksDBCheckpointMetadata  # noqa: E402

OUT = Path(__file__).with_name("avro_golden.json")
BATCHES = 3
KEYS = 8
RICH = (
    "i INT, l BIGINT, f FLOAT, d DOUBLE, dec DECIMAL(10,2), bigdec DECIMAL(38,10), "
    "str STRING, bin BINARY, bool BOOLEAN, dt DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, "
    "arr ARRAY<INT>, arrs ARRAY<STRUCT<x:INT,y:STRING>>, m MAP<STRING,BIGINT>, "
    "ms MAP<STRING,STRUCT<a:DOUBLE>>, nested STRUCT<p:INT,q:STRUCT<r:STRING>>, "
    "aa ARRAY<ARRAY<STRING>>, nul STRING"
)
# Utf8 hashes collide for these (31 * 'A' + 'a' == 31 * 'B' + 'B'): long HashMap chains.
COLLIDING = [a + b + c for a in ("Aa", "BB") for b in ("Aa", "BB") for c in ("Aa", "BB")]
FLOATS = [0.1, -0.0, float("nan"), float("inf"), -1.5e-45, 3.4028234663852886e38, 16777217.0]
DOUBLES = [1e-5, 1e21, float("-inf"), float("nan"), 5e-324, -0.0, 0.1 + 0.2]


def rich(n: int) -> tuple[Any, ...]:
    """The value state row for update ``n``; every fifth one is all nulls."""
    if n % 5 == 4:
        return (None,) * 19
    neg = -1 if n % 2 else 1
    return (
        [-(2**31), 2**31 - 1, 0, neg * n * 100_003][n % 4],
        [-(2**63), 2**63 - 1, neg * (n << 40)][n % 3],
        FLOATS[n % len(FLOATS)],
        DOUBLES[n % len(DOUBLES)],
        Decimal(neg * n) * Decimal("12.34") if n % 3 else Decimal("-99999999.99"),
        Decimal("-9999999999999999999999999999.9999999999")
        if n % 7 == 0
        else Decimal(neg * n) * Decimal("1234567890123456789.0123456789"),
        ["", "plain", f"héllo-{n}-😀", 'q"\\\n\t\x01'][n % 4],
        [b"", bytes([n, 0, 255])][n % 2],
        n % 2 == 0,
        dt.date(1970, 1, 1) + dt.timedelta(days=neg * n * 1000),
        dt.datetime(2020, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=neg * n * 12345.678912),
        dt.datetime(2021, 6, 1) + dt.timedelta(microseconds=neg * n * 987654321),
        [] if n % 3 == 0 else [neg * k for k in range(n)],
        [(k, f"y{k}") if k % 2 else None for k in range(n % 4)],
        {f"k{k}": k * neg for k in range(n % 23)}
        if n % 2
        else {c: i for i, c in enumerate(COLLIDING[: n % 9])},
        {"a": (1.5 * n,), "z": None, "": (None,)} if n % 2 else {},
        (n, (f"r{n}",) if n % 2 else None),
        [[f"{n}", "x"], [], None] if n % 2 else None,
        None,
    )


def make_processor() -> Any:
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Rich(StatefulProcessor):  # type: ignore[misc]
        def init(self, handle: Any) -> None:
            self.rich = handle.getValueState("rich", RICH)
            self.lst = handle.getListState("lst", "v INT, w STRING, dec DECIMAL(5,1)")
            self.mp = handle.getMapState("mp", "uk INT, us STRING", "mv DOUBLE, md DATE")

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            (k,) = key
            total = 0
            for pdf in rows:
                for n in pdf["n"]:
                    n = int(n)
                    total += n
                    self.rich.update(rich(n))
                    self.lst.appendValue((n, f"w{n}" if n % 2 else None, Decimal(n) / 10))
                    day = dt.date(2000, 1, 1) + dt.timedelta(days=n)
                    self.mp.updateValue((n % 3, f"s{n % 2}"), (n * 0.5, day))
            yield pd.DataFrame([(k, total)], columns=["k", "total"])

        def close(self) -> None:
            pass

    return Rich()


def session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .config("spark.sql.streaming.stateStore.encodingFormat", "avro")
        # A snapshot zip per version, so the last zip holds the state the reader sees.
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_lines(checkpoint: str, target: str) -> None:
    """Each state variable's rows as JSON, into ``target``.

    ``lines`` are ``to_json(struct(*))``, which writes maps in MapData order (what the
    reader decoded). ``dataset_tojson`` are ``Dataset.toJSON()``, which in Spark 4.3
    reorders maps of five or more entries (it seems to go through Scala maps); kept for
    the JSON renderer, not used by ``test_avro.py``.
    """
    spark = session()
    lines: dict[str, list[str]] = {}
    dataset_tojson: dict[str, list[str]] = {}
    for var in ("rich", "lst", "mp"):
        reader = spark.read.format("statestore").option("stateVarName", var)
        if var == "lst":
            reader = reader.option("flattenCollectionTypes", "true")
        frame = reader.load(checkpoint)
        rows = frame.selectExpr("to_json(struct(*))").collect()
        lines[var] = sorted(row[0] for row in rows)
        dataset_tojson[var] = sorted(frame.toJSON().collect())
    spark.stop()
    Path(target).write_text(json.dumps({"lines": lines, "dataset_tojson": dataset_tojson}))


def main() -> None:
    spark = session()
    work = Path(tempfile.mkdtemp(prefix="avro-golden-"))
    try:
        source = work / "input"
        source.mkdir()
        checkpoint = work / "checkpoint"
        stream = spark.readStream.schema("key STRING, n INT").json(str(source))
        query = (
            stream.groupBy("key")
            .transformWithStateInPandas(make_processor(), "k STRING, total LONG", "Update", "None")
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
        version = spark.version
        for batch in range(BATCHES):
            rows = [{"key": f"k{j}", "n": batch * KEYS + j} for j in range(KEYS)]
            text = "".join(json.dumps(r) + "\n" for r in rows)
            (source / f"b{batch}.json").write_text(text)
            query.processAllAvailable()
        query.stop()
        spark.stop()
        # Read back in a fresh JVM, as a separate job would.
        lines_file = work / "lines.json"
        subprocess.run(
            [sys.executable, __file__, "--read", str(checkpoint), str(lines_file)], check=True
        )
        read_back = json.loads(lines_file.read_text())

        operator = checkpoint / "state" / "0"
        (schema_file,) = (operator / "_stateSchema" / "default").glob("[0-9]*")
        rows_out = []
        mappings: dict[str, dict[str, int]] = {}
        for part_dir in sorted(p for p in operator.iterdir() if p.name.isdigit()):
            zips = sorted(part_dir.glob("*.zip"), key=lambda p: int(p.name.split(".")[0]))
            with zipfile.ZipFile(zips[-1]) as archive:
                meta = RocksDBCheckpointMetadata.from_bytes(archive.read("metadata"))
            mappings[part_dir.name] = dict(meta.column_family_mapping or {})
            restore(part_dir, zips[-1].name, work / f"db{part_dir.name}", merge_delimiter="")
            db = open_read_only(work / f"db{part_dir.name}")
            try:
                for key, value in db.items():
                    rows_out.append(
                        {"partition_id": int(part_dir.name), "key": key.hex(), "value": value.hex()}
                    )
            finally:
                db.close()
        OUT.write_text(
            json.dumps(
                {
                    "spark_version": version,
                    "schema_file": base64.b64encode(schema_file.read_bytes()).decode(),
                    "column_family_mappings": mappings,
                    "rows": rows_out,
                    "lines": read_back["lines"],
                    "dataset_tojson": read_back["dataset_tojson"],
                },
                indent=1,
                ensure_ascii=False,
            )
            + "\n"
        )
        count = sum(map(len, read_back["lines"].values()))
        print(f"wrote {len(rows_out)} rows, {count} lines to {OUT}")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--read"]:
        read_lines(sys.argv[2], sys.argv[3])
    else:
        main()
