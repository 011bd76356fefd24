"""Capture what Spark's State Data Source prints, as golden files for ``test_sparkjson.py``.

Not a test; run by hand with PySpark (4.3.0, Java 17) when the rendering rules need
re-checking::

    .venv/bin/python tests/parsers/data/make_json_golden.py [CORPUS_OUT_DIR]

* ``json_golden.json``: a streaming aggregation groups rows by a rich key and keeps
  ``first(...)`` of one column per tricky value class, so the state store holds UnsafeRows
  of every type. The State Data Source reads the checkpoint back with ``toJSON()`` in
  several session time zones; the raw key/value bytes come from the ``.delta`` file.
* ``java_number_text.json``: Spark's text for random floats and doubles (bit patterns),
  including values whose Java 17 text is not the shortest.
* ``corpus_json_golden.json`` (with ``CORPUS_OUT_DIR``, the unpacked ``out`` directory of
  ``shared/fixtures/spark-checkpoints.tar.gz``): Spark 4.3's lines for a few HDFS-provider
  checkpoints of the corpus, written by Spark 3.5.9 and 4.3.0.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from stateglass.parsers.compression import decompress  # noqa: E402
from stateglass.parsers.hdfs_files import iter_records  # noqa: E402

OUT = Path(__file__).with_name("json_golden.json")
CORPUS_OUT = Path(__file__).with_name("corpus_json_golden.json")
NUMBERS_OUT = Path(__file__).with_name("java_number_text.json")
CORPUS_SCENARIOS = [
    "3.5.9/agg-hdfs",
    "3.5.9/dedup-hdfs",
    "3.5.9/winagg-hdfs",
    "3.5.9/session-hdfs",
    "3.5.9c/fmgws-hdfs",
    "3.5.9c/fmgws-hdfs-v1",
    "3.5.9c/dedupww-hdfs",
    "4.3.0/agg-hdfs",
    "4.3.0/dedup-hdfs",
    "4.3.0/fmgws-hdfs",
]
ZONES = ["UTC", "+05:30", "America/Los_Angeles", "Asia/Kolkata"]
N = 24  # rows (= keys); column c takes value i % len(values[c])


def _f(v: str) -> str:
    return f"cast({v} as float)"


def _d(v: str) -> str:
    return f"cast({v} as double)"


# One SQL array of literal values per column (null included); row i picks element i % len.
COLUMNS: dict[str, list[str]] = {
    "b": ["true", "false", "cast(null as boolean)"],
    "y": ["cast(-128 as tinyint)", "cast(127 as tinyint)"],
    "sh": ["cast(-32768 as smallint)", "cast(7 as smallint)"],
    "i32": ["-2147483648", "2147483647", "0"],
    "i64": ["-9223372036854775808", "9223372036854775807", "cast(null as bigint)"],
    "f32": [
        _f(v)
        for v in [
            "0.1",
            "1e-5",
            "1e7",
            "12345678",
            "-0.0",
            "'NaN'",
            "'Infinity'",
            "'-Infinity'",
            "1.4e-45",
            "3.4028235e38",
            "495433023488",
            "0.001",
            "1e-4",
            "8.783768771816667e-28",
            "0.25",
            "16777217",
        ]
    ],
    "f64": [
        _d(v)
        for v in [
            "1e-5",
            "1e21",
            "1e7",
            "1e-3",
            "1e-4",
            "'NaN'",
            "'-Infinity'",
            "4.9e-324",
            "2.842170943040401e-14",
            "1.9395363977182264e18",
            "0.1D + 0.2D",
            "100",
            "123456789",
            "-0.0",
            "1e300",
            "5e-324",
        ]
    ],
    "dec38": [
        "cast(1.5 as decimal(38,18))",
        "cast(-1.5 as decimal(38,18))",
        "cast(0 as decimal(38,18))",
        "cast(1e-18 as decimal(38,18))",
        "cast('99999999999999999999.999999999999999999' as decimal(38,18))",
        "cast(null as decimal(38,18))",
    ],
    "dec10_9": [
        "cast(-0.0000001 as decimal(10,9))",
        "cast(0.000001 as decimal(10,9))",
        "cast(1 as decimal(10,9))",
        "cast(0 as decimal(10,9))",
    ],
    "dec5_0": ["cast(1000 as decimal(5,0))", "cast(-7 as decimal(5,0))"],
    "s": [
        "'plain'",
        "''",
        "'a\"b\\\\c/d'",
        "concat('x', char(1), char(31), char(127))",
        "concat(char(8232), char(8233), char(133), '<>&')",
        "'é😀'",
        "concat(char(9), char(10), char(13), char(8), char(12))",
        "cast(unhex('ff61') as string)",
        "cast(unhex('eda080') as string)",
        "cast(unhex('f4908080c0af') as string)",
        "cast(null as string)",
    ],
    "bin": ["unhex('00ff10')", "X''", "cast('abc' as binary)"],
    "dt": [
        f"date_from_unix_date({n})"
        for n in [0, -1, -141430, -141438, -719163, -719529, 2932897, 19723]
    ],
    "ts": [
        f"timestamp_micros({n})"
        for n in [
            0,
            -1,
            -1001,
            1700000000123456,
            -12219292800000001,
            -12219292800000000 - 86400000000 * 3,
            -62198755200000000,
            253402300800000000,
            -3000000000000000,
        ]
    ],
    "ntz": [
        f"cast(timestamp_micros({n}) as timestamp_ntz)"
        for n in [0, -1, 1700000000123456, -12219292800000001, 253402300800000000]
    ],
    "ym": [
        "interval '1-2' year to month",
        "interval '-0-3' year to month",
        "cast(interval '3' year as interval year)",
    ],
    "dti": [
        "interval '1 02:03:04.5' day to second",
        "interval '-0 00:01:30' day to second",
        "cast(interval '26' hour as interval hour)",
        "interval '0 00:00:01.000001' day to second",
    ],
    "arr": ["array(1, null, 3)", "array()", "cast(null as array<int>)"],
    "arr_s": ["array('a', null, '')", "array()"],
    "arr_f": ["array(cast(0.1 as float), cast('NaN' as float), null)"],
    "arr_dec": ["array(cast(1.5 as decimal(38,18)), null)", "array(cast(2 as decimal(38,18)))"],
    "arr_ts": ["array(timestamp_micros(1), null)"],
    "arr_st": ["array(named_struct('a', 1, 'b', cast(null as string)), null)"],
    "arr_arr": ["array(array(cast(null as int)), array(1), array())"],
    "m": ["map('a', null, 'b', 1)", "map()", "cast(null as map<string,int>)"],
    "m_int": ["map(1, 'x', -2, null)"],
    "m_dbl": ["map(cast(1e7 as double), 1, cast('NaN' as double), 2)"],
    "m_dec": ["map(cast(0 as decimal(20,10)), 1, cast(1.5 as decimal(20,10)), 2)"],
    "m_date": ["map(date_from_unix_date(19723), true)"],
    "m_ts": ["map(timestamp_micros(1704067200000000), 1)"],
    "m_st": [
        "map(named_struct('a', 1, 'b', 'xy'), 'v',"
        " named_struct('a', -1, 'b', cast(null as string)), 'w')"
    ],
    "m_arr": ["map(array(1, 2), 'v')", "map(array(3), 'w')"],
    "m_m": ["map('k', map('a', null))"],
    "m_bool": ["map(true, 1, false, 0)"],
    "m_ym": ["map(interval '1-0' year to month, 1)"],
    "st": [
        "named_struct('a', null, 'b', 1)",
        "named_struct('a', 2, 'b', null)",
        "cast(null as struct<a:int,b:int>)",
    ],
    "st_nested": [
        "named_struct('x', named_struct('y', cast(null as int)), 'z', array(named_struct('w', 1)))"
    ],
    "st_dup": ["named_struct('a', 1, 'a', 'two')"],
    "st_empty": ["named_struct()"],
    "nul": ["null"],
    "ci": [
        "make_interval(1, 2, 3, 4, 5, 6, 7.008009)",
        "make_interval(0, -13, 0, -1, 0, 0, -0.5)",
        "make_interval(0, 0, 0, 0, 0, 0, 0)",
    ],
}

# Key columns beside the row number: Spark keeps grouping keys in the state key row.
KEY_COLUMNS: dict[str, list[str]] = {
    "kd": [
        "cast(2.5 as decimal(38,18))",
        "cast(null as decimal(38,18))",
        "cast(-1 as decimal(38,18))",
    ],
    "kts": ["timestamp_micros(1700000000123456)", "timestamp_micros(-1)"],
    "kst": [
        "named_struct('s', 'k\"1', 'f', cast(0.1 as float))",
        "named_struct('s', cast(null as string), 'f', cast(2 as float))",
    ],
    "karr": ["array(cast(1 as bigint), null)", "cast(array() as array<bigint>)"],
}


def _pick(values: list[str]) -> str:
    return f"element_at(array({', '.join(values)}), cast(i % {len(values)} as int) + 1)"


def corpus_golden(spark: Any, corpus: Path) -> None:
    """Spark's lines (latest batch, session zone UTC) for some corpus checkpoints."""
    out = {}
    for scenario in CORPUS_SCENARIOS:
        state = spark.read.format("statestore").load(str(corpus / scenario / "checkpoint"))
        out[scenario] = {
            "key_schema": json.loads(state.schema["key"].dataType.json()),
            "value_schema": json.loads(state.schema["value"].dataType.json()),
            "lines": sorted(state.toJSON().collect()),
        }
    CORPUS_OUT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(out)} scenarios to {CORPUS_OUT}")


def main() -> None:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        rich_golden(spark)
        number_golden(spark)
        if len(sys.argv) > 1:
            corpus_golden(spark, Path(sys.argv[1]))
    finally:
        spark.stop()


def _one_pair_per_line(out: dict[str, list[list[str]]]) -> str:
    blocks = []
    for kind, pairs in out.items():
        body = ",\n".join(json.dumps(p) for p in pairs)
        blocks.append(f"{json.dumps(kind)}: [\n{body}\n]")
    return "{\n" + ",\n".join(blocks) + "\n}\n"


def number_golden(spark: Any, count: int = 1500) -> None:
    """``[bits as hex, Spark's text]`` for random float and double bit patterns."""
    import random
    import struct

    rnd = random.Random(20261121)

    def finite(fmt: str, bits: int) -> float | None:
        x = struct.unpack(fmt, struct.pack(fmt.upper().replace("F", "I").replace("D", "Q"), bits))[
            0
        ]
        return x if x == x and abs(x) != float("inf") else None

    floats: list[tuple[int, float]] = []
    doubles: list[tuple[int, float]] = []
    while len(floats) < count:
        bits = rnd.getrandbits(32)
        x = finite("<f", bits)
        if x is not None:
            floats.append((bits, x))
    while len(doubles) < count:
        bits = rnd.getrandbits(64)
        if len(doubles) % 3 == 0:  # few significant bits: powers of two and the like
            bits &= ~((1 << rnd.randint(0, 52)) - 1)
        x = finite("<d", bits)
        if x is not None:
            doubles.append((bits, x))
    rows = [(i, f, d) for i, ((_, f), (_, d)) in enumerate(zip(floats, doubles, strict=True))]
    frame = spark.createDataFrame(rows, "i long, f float, d double")
    texts = {}
    for line in frame.toJSON().collect():
        obj = json.loads(line)
        f_text = line.split('"f":', 1)[1].split(",", 1)[0]
        d_text = line.split('"d":', 1)[1].rstrip("}")
        texts[obj["i"]] = (f_text, d_text)
    out = {
        "float": [[f"{bits:08x}", texts[i][0]] for i, (bits, _) in enumerate(floats)],
        "double": [[f"{bits:016x}", texts[i][1]] for i, (bits, _) in enumerate(doubles)],
    }
    NUMBERS_OUT.write_text(_one_pair_per_line(out))
    print(f"wrote {2 * count} numbers to {NUMBERS_OUT}")


def rich_golden(spark: Any) -> None:
    """State rows of every type and Spark's lines for them in several time zones."""
    from pyspark.sql.functions import expr

    work = Path(tempfile.mkdtemp(prefix="json-golden-"))
    try:
        source = work / "input"
        spark.range(N).withColumnRenamed("id", "i").write.parquet(str(source))
        stream = spark.readStream.schema("i long").parquet(str(source))
        keys = ["i"] + [f"{_pick(v)} as {name}" for name, v in KEY_COLUMNS.items()]
        values = [f"{_pick(v)} as {name}" for name, v in COLUMNS.items()]
        projected = stream.selectExpr(*keys, *values)
        aggs = [f"first({name}) as {name}" for name in COLUMNS]
        grouped = projected.groupBy("i", *KEY_COLUMNS).agg(*[expr(a) for a in aggs])
        checkpoint = work / "checkpoint"
        query = (
            grouped.writeStream.outputMode("update")
            .format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

        state = spark.read.format("statestore").load(str(checkpoint))
        schema = state.schema
        key_schema = schema["key"].dataType.json()
        value_schema = schema["value"].dataType.json()
        lines: dict[str, list[str]] = {}
        for zone in ZONES:
            spark.conf.set("spark.sql.session.timeZone", zone)
            lines[zone] = sorted(
                spark.read.format("statestore").load(str(checkpoint)).toJSON().collect()
            )
        spark.conf.set("spark.sql.session.timeZone", "UTC")

        rows = []
        for part_dir in sorted((checkpoint / "state" / "0").iterdir()):
            if not part_dir.name.isdigit():
                continue
            for delta in sorted(part_dir.glob("*.delta")):
                data = decompress("lz4", delta.read_bytes())
                for key, value in iter_records(data):
                    assert value is not None
                    rows.append(
                        {"partition_id": int(part_dir.name), "key": key.hex(), "value": value.hex()}
                    )
        OUT.write_text(
            json.dumps(
                {
                    "spark_version": spark.version,
                    "key_schema": json.loads(key_schema),
                    "value_schema": json.loads(value_schema),
                    "rows": rows,
                    "lines": lines,
                },
                indent=1,
                ensure_ascii=False,
            )
            + "\n"
        )
        print(f"wrote {len(rows)} rows, {sum(map(len, lines.values()))} lines to {OUT}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
