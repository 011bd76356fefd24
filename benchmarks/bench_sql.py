"""`stateglass sql` against Spark's State Data Source in `spark-submit`, and against
`stateglass state --format parquet`, on aggregation checkpoints of 1M and 10M keys.

Usage::

    .venv/bin/python benchmarks/bench_sql.py [--case hdfs:1000000]... [--partitions 64]
        [--runs 3] [--workdir /work/bench-data] [--no-spark]

Each ``--case PROVIDER:KEYS`` (default: ``hdfs:1000000``) is the counter checkpoint of
``bench_state_read.py`` with ``--partitions`` shuffle partitions (written once with PySpark
and cached under ``--workdir``, outside the repository: 10M keys take many minutes on two
cores; key ``struct<k:string>``, value ``struct<count:bigint,sum:bigint>``). Each case runs
as a whole process, alternating, with the wall time and the peak RSS of its process tree (the
JVM included):

* the aggregate ``SELECT count(*), max(value.sum) FROM … WHERE value.count > 0`` through
  ``stateglass sql`` and through ``spark-submit`` (``spark.read.format("statestore")``,
  the same SQL on a temporary view); both answers are compared;
* the same query filtered to one partition (``AND partition_id = 0``) against unfiltered
  (the acceptance: at most 1/10 of it, with 64 partitions);
* ``SELECT *`` to Parquet through ``stateglass sql`` against ``stateglass state --format
  parquet`` (the same rows; at most 1.2×; the peak RSS at 10M keys is the Memory figure,
  at most 1 GiB).

The ``stateglass`` processes cache their bytecode under ``WORKDIR/pycache`` (as
``bench_state_read.py`` does), so a shell's ``PYTHONDONTWRITEBYTECODE=1`` does not make every
run recompile every module. The figures go to stdout as Markdown tables for
docs/benchmarks.md, with the load average before each run and the ratios of this run.
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

Run = tuple[float, float, str]

SETTLE_S = 3.0
# A 10M-key scan under load outlasts the default 60 s query limit.
NO_LIMIT = ("--time-limit", "86400")
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

# The two aggregates as queries of one session (a notebook's, the dashboard's): the time of
# each query alone, the process's start-up and the catalog's listing left out; nothing kept
# between them, so each decodes what it reads.
IN_SESSION = r"""
import sys, time
from stateglass.collectors.catalog import SqlLimits, SqlSession
cp, out, unfiltered, filtered = sys.argv[1:5]
with SqlSession([cp], limits=SqlLimits(time_s=86400, cache_bytes=0)) as session:
    session.execute("SELECT 1")
    took = []
    for query in (unfiltered, filtered):
        start = time.perf_counter()
        session.execute(query)
        took.append(time.perf_counter() - start)
with open(out, "w") as fh:
    fh.write(",".join(f"{t:.4f}" for t in took) + "\n")
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


AGG = "aggregate, stateglass sql"
SPARK = "aggregate, Spark State Data Source (spark-submit)"
ONE = "aggregate, one partition (partition_id = 0), stateglass sql"
SQL_PARQUET = "SELECT * to Parquet, stateglass sql"
STATE_PARQUET = "state --format parquet"
SESSION = "both aggregates as queries of one SqlSession (the process)"
SESSION_AGG = "aggregate, a query of the session"
SESSION_ONE = "one partition, a query of the session"


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
    session_script = os.path.join(workdir, "in_session.py")
    with open(session_script, "w") as fh:
        fh.write(IN_SESSION)
    spark_query = AGGREGATE.format(t="state", extra="")
    return {
        AGG: (
            [sg, "sql", cp, *NO_LIMIT, "--format", "csv", "-o", ours, "-e", aggregate],
            ours,
        ),
        SPARK: (
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
        ONE: (
            [sg, "sql", cp, *NO_LIMIT, "--format", "csv", "-o", part, "-e", one_partition],
            None,
        ),
        SQL_PARQUET: (
            [sg, "sql", cp, *NO_LIMIT, "--format", "parquet", "-o", sql_parquet, "-e", everything],
            None,
        ),
        STATE_PARQUET: (
            [sg, "state", cp, "--format", "parquet", "-o", os.path.join(workdir, "st.parquet")],
            None,
        ),
        SESSION: (
            [
                PY,
                session_script,
                cp,
                os.path.join(workdir, "session.csv"),
                aggregate,
                one_partition,
            ],
            os.path.join(workdir, "session.csv"),
        ),
    }


def measure(
    cp: str, workdir: str, runs: int, spark: bool
) -> tuple[dict[str, list[Run]], dict[str, str]]:
    """Every case of ``cp``, ``runs`` times, alternating: (label -> runs, label -> answer)."""
    commands = cases(cp, workdir)
    if not spark:
        del commands[SPARK]
    spark_env_ = spark_env()
    ours_env = {k: v for k, v in spark_env_.items() if k != "PYTHONDONTWRITEBYTECODE"}
    ours_env["PYTHONPYCACHEPREFIX"] = os.path.join(workdir, "pycache")
    timed(commands[AGG][0], env=ours_env)  # warm-up: bytecode, page cache
    results: dict[str, list[Run]] = {label: [] for label in commands}
    answers: dict[str, str] = {}
    for _ in range(runs):
        for label, (cmd, answer) in commands.items():
            time.sleep(SETTLE_S)
            load = load_average()
            wall, rss = timed(cmd, env=spark_env_ if label == SPARK else ours_env)
            results[label].append((wall, rss, load))
            if label == SESSION:
                # The queries' own times, as two more cases of this run.
                for name, took in zip(
                    (SESSION_AGG, SESSION_ONE), _answer(answer).split(","), strict=True
                ):
                    results.setdefault(name, []).append((float(took), rss, load))
                    print(f"{name}: {float(took):.3f} s", flush=True)
            elif answer is not None:
                answers[label] = _answer(answer)
            print(f"{label}: {wall:.2f} s, {rss:.0f} MiB (load {load})", flush=True)
    return results, answers


def _ratio(results: dict[str, list[Run]], top: str, bottom: str) -> str:
    """``top / bottom``, best against best and median against median."""
    if top not in results or bottom not in results:
        return "not run"
    a = [w for w, _, _ in results[top]]
    b = [w for w, _, _ in results[bottom]]
    best = min(a) / min(b)
    median = statistics.median(a) / statistics.median(b)
    return f"{best:.2f} best, {median:.2f} median"


def report(results: dict[str, list[Run]], answers: dict[str, str], title: str) -> None:
    print()
    print(f"**{title}** Answers: {answers}\n")
    print("| case | best wall (s) | median (s) | all runs (s) | peak RSS (MiB) | load before |")
    print("|---|---|---|---|---|---|")
    for label, got in results.items():
        walls = [w for w, _, _ in got]
        print(
            f"| {label} | {min(walls):.2f} | {statistics.median(walls):.2f} | "
            f"{', '.join(f'{w:.2f}' for w in walls)} | {max(r for _, r, _ in got):.0f} | "
            f"{'; '.join(load for _, _, load in got)} |"
        )
    print()
    print(f"* Spark / stateglass sql (target >= 20): {_ratio(results, SPARK, AGG)}")
    print(f"* one partition / unfiltered (target <= 0.1): {_ratio(results, ONE, AGG)}")
    print(f"* the same, as queries of one session: {_ratio(results, SESSION_ONE, SESSION_AGG)}")
    print(
        "* SQL to Parquet / state --format parquet (target <= 1.2): "
        f"{_ratio(results, SQL_PARQUET, STATE_PARQUET)}"
    )
    print(
        f"* peak RSS of SELECT * to Parquet: {max(r for _, r, _ in results[SQL_PARQUET]):.0f} MiB"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--case", action="append", help="PROVIDER:KEYS, e.g. rocksdb:10000000")
    p.add_argument("--partitions", type=int, default=64)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--workdir", default="/work/bench-data")
    p.add_argument("--no-spark", action="store_true", help="leave out spark-submit")
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    for case in args.case or ["hdfs:1000000"]:
        provider, keys = case.split(":")
        cp = checkpoint(args.workdir, "counter", provider, int(keys), args.partitions)
        results, answers = measure(cp, args.workdir, args.runs, not args.no_spark)
        report(
            results,
            answers,
            f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
            f"{os.cpu_count()} CPUs, {int(keys):,} keys, {provider} provider, "
            f"{args.partitions} partitions.",
        )


if __name__ == "__main__":
    main()
