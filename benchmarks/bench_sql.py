"""`stateglass sql` against Spark's State Data Source in `spark-submit`, and against
`stateglass state --format parquet`, on the 1M-key aggregation checkpoint.

Usage::

    .venv/bin/python benchmarks/bench_sql.py [--keys 1000000] [--runs 3]
        [--provider hdfs|rocksdb] [--workdir /work/bench-data]

The checkpoint is the counter case of ``bench_state_read.py`` (written once with PySpark,
cached under ``--workdir``: ``--keys`` keys, 4 shuffle partitions; key ``struct<k:string>``,
value ``struct<count:bigint,sum:bigint>``). Each case runs as a whole process, alternating,
with the wall time and the peak RSS of its process tree (the JVM included):

* the aggregate ``SELECT count(*), max(value.sum) FROM … WHERE value.count > 0`` through
  ``stateglass sql`` and through ``spark-submit`` (``spark.read.format("statestore")``,
  the same SQL on a temporary view); both answers are compared;
* the same query filtered to one partition (``AND partition_id = 0``) against unfiltered;
* ``SELECT *`` to Parquet through ``stateglass sql`` against ``stateglass state --format
  parquet`` (the same rows; the peak RSS is the Memory acceptance's figure).

The figures go to stdout as a Markdown table for docs/benchmarks.md, with the load average.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_state_read import PY, checkpoint, load_average, timed  # noqa: E402

SETTLE_S = 3.0
AGGREGATE = "SELECT count(*) AS n, max(value.sum) AS top FROM {t} WHERE value.count > 0{extra}"

SPARK_SQL = r"""
import sys
from pyspark.sql import SparkSession
cp, out, query = sys.argv[1], sys.argv[2], sys.argv[3]
spark = (SparkSession.builder.config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.read.format("statestore").load(cp).createOrReplaceTempView("state")
row = spark.sql(query).collect()[0]
with open(out, "w") as fh:
    fh.write(f"{row[0]},{row[1]}\n")
spark.stop()
"""


def _stateglass() -> str:
    return shutil.which("stateglass", path=os.path.dirname(PY)) or "stateglass"


def _answer(path: str) -> str:
    with open(path) as fh:
        lines = fh.read().splitlines()
    return lines[-1].strip()


def _table_name(cp: str) -> str:
    out = subprocess.run(
        [_stateglass(), "sql", cp, "--tables", "--format", "csv"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    schema, table = next(line.split(",")[:2] for line in out[1:] if line.endswith(",state"))
    return f"{schema}.{table}"


def spark_env() -> dict[str, str]:
    """spark-submit from the virtualenv's pyspark: its SPARK_HOME, this Python for the driver."""
    home = subprocess.run(
        [PY, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": PY, "PYSPARK_DRIVER_PYTHON": PY}


def cases(cp: str, workdir: str) -> dict[str, tuple[list[str], str | None]]:
    """Label -> (command, the file whose last line is its answer; None: nothing to compare)."""
    sg = _stateglass()
    table = _table_name(cp)
    script = os.path.join(workdir, "spark_sql.py")
    with open(script, "w") as fh:
        fh.write(SPARK_SQL)
    spark_submit = os.path.join(os.path.dirname(PY), "spark-submit")
    ours = os.path.join(workdir, "ours.csv")
    spark = os.path.join(workdir, "spark.csv")
    part = os.path.join(workdir, "part.csv")
    aggregate = AGGREGATE.format(t=table, extra="")
    one_partition = AGGREGATE.format(t=table, extra=" AND partition_id = 0")
    sql_parquet = os.path.join(workdir, "sql.parquet")
    everything = f"SELECT * FROM {table}"
    spark_query = AGGREGATE.format(t="state", extra="")
    return {
        "aggregate, stateglass sql": (
            [sg, "sql", cp, "--format", "csv", "-o", ours, "-e", aggregate],
            ours,
        ),
        "aggregate, Spark State Data Source (spark-submit)": (
            [
                spark_submit,
                "--master",
                "local[2]",
                "--driver-memory",
                "6g",
                script,
                cp,
                spark,
                spark_query,
            ],
            spark,
        ),
        "aggregate, one partition (partition_id = 0), stateglass sql": (
            [sg, "sql", cp, "--format", "csv", "-o", part, "-e", one_partition],
            None,
        ),
        "SELECT * to Parquet, stateglass sql": (
            [sg, "sql", cp, "--format", "parquet", "-o", sql_parquet, "-e", everything],
            None,
        ),
        "state --format parquet": (
            [sg, "state", cp, "--format", "parquet", "-o", os.path.join(workdir, "st.parquet")],
            None,
        ),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--provider", choices=("hdfs", "rocksdb"), default="hdfs")
    p.add_argument("--workdir", default="/work/bench-data")
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    cp = checkpoint(args.workdir, "counter", args.provider, args.keys)
    runs = cases(cp, args.workdir)
    env = spark_env()
    results: dict[str, list[tuple[float, float, str]]] = {label: [] for label in runs}
    answers: dict[str, str] = {}
    for _ in range(args.runs):
        for label, (cmd, answer) in runs.items():
            time.sleep(SETTLE_S)
            load = load_average()
            wall, rss = timed(cmd, env=env)
            results[label].append((wall, rss, load))
            if answer is not None:
                answers[label] = _answer(answer)
            print(f"{label}: {wall:.2f} s, {rss:.0f} MiB (load {load})", flush=True)
    print()
    print(
        f"**{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {args.keys:,} keys, {args.provider} provider, "
        f"4 partitions.** Answers: {answers}\n"
    )
    print("| case | best wall (s) | median (s) | all runs (s) | peak RSS (MiB) | load before |")
    print("|---|---|---|---|---|---|")
    for label, got in results.items():
        walls = [w for w, _, _ in got]
        print(
            f"| {label} | {min(walls):.2f} | {statistics.median(walls):.2f} | "
            f"{', '.join(f'{w:.2f}' for w in walls)} | {max(r for _, r, _ in got):.0f} | "
            f"{'; '.join(load for _, _, load in got)} |"
        )


if __name__ == "__main__":
    main()
