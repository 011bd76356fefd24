"""StateGlass on S3 (moto's server on 127.0.0.1): what reading where checkpoints live costs.

Usage::

    .venv/bin/python benchmarks/bench_remote.py [--keys 1000000] [--partitions 200] [--fleet 500]

1. ``state`` of the ``--keys`` aggregation checkpoint (written once by
   ``bench_state_read.py``'s PySpark helper), uploaded to the bucket: cold (empty cache) and
   cached (the same cache directory), with the requests ``--verbose`` counts.
2. An incremental ``collect`` of one new batch on a ``--partitions`` checkpoint (written by
   ``bench_collect.py``'s helper): full collect, one more batch run by Spark on a local copy,
   only the new files uploaded, then the timed incremental collect and its LIST/GET counts
   (target: at most 2 requests per partition plus one per new file).
3. Discovery of ``--fleet`` checkpoints under one prefix (each a minimal checkpoint:
   ``metadata``, ``offsets/0``, ``commits/0``): wall time and LISTs.
4. ``sql`` on ``bench_sql.py``'s ``--sql-keys`` counter checkpoints of 64 partitions (HDFS and
   RocksDB, cached under ``--workdir``), uploaded: ``bench_sql.py``'s aggregate cold, cached,
   and filtered to one partition (its GETs: that partition's files and the checkpoint's own),
   against the same query on local disk; with ``--sql-jobs 1,4,16`` the cold query once per
   ``--jobs``.

``--latency-ms`` puts a proxy between StateGlass and moto that holds each request that long,
as a store's round trip would: on loopback a request costs moto's CPU and no waiting, so
without it what more threads would overlap is not there to overlap. Uploads go to moto
directly.

Every figure is printed with the load average before it; the machine is shared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
PY = sys.executable
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bench_collect import ensure_checkpoint, machine, run_query, write_source_file  # noqa: E402
from bench_state_read import WRITE_CHECKPOINT, checkpoint, load_average  # noqa: E402

BUCKET = "bench"
COUNTS = re.compile(r"requests: (\d+) LIST, (\d+) GET, (\d+) HEAD .*cache: (\d+) hits")


def files_of(root: str) -> dict[str, float]:
    out = {}
    for path in Path(root).rglob("*"):
        if path.is_file():
            out[path.relative_to(root).as_posix()] = path.stat().st_mtime
    return out


def upload(client: Any, local: str, prefix: str, only: set[str] | None = None) -> int:
    names = sorted(only if only is not None else files_of(local))

    def put(rel: str) -> None:
        with open(os.path.join(local, rel), "rb") as fh:
            client.put_object(Bucket=BUCKET, Key=f"{prefix}/{rel}", Body=fh.read())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, names))
    return len(names)


def stateglass(*args: str, stdout: Any = subprocess.DEVNULL) -> tuple[float, dict[str, int]]:
    """Run the CLI as a user would; wall time and the request counts of ``--verbose``."""
    exe = shutil.which("stateglass", path=os.path.dirname(PY)) or "stateglass"
    start = time.perf_counter()
    proc = subprocess.run(
        [exe, *args, "--verbose"], stdout=stdout, stderr=subprocess.PIPE, text=True, check=False
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"stateglass {' '.join(args)} failed:\n{proc.stderr}")
    m = COUNTS.search(proc.stderr)
    assert m is not None, proc.stderr
    keys = ("list", "get", "head", "cache_hits")
    return wall, dict(zip(keys, map(int, m.groups()), strict=True))


def bench_state(client: Any, keys: int, cache: str) -> None:
    cp = os.path.join(OUT, f"agg-hdfs-{keys}")
    if not os.path.isdir(os.path.join(cp, "commits")):
        print(f"writing {cp} with PySpark …", flush=True)
        subprocess.run([PY, "-c", WRITE_CHECKPOINT, str(keys), cp, "hdfs"], check=True)
    n = upload(client, cp, "state")
    url = f"s3://{BUCKET}/state"
    with tempfile.TemporaryFile("w") as out:
        load = load_average()
        cold = stateglass("state", url, "--cache-dir", cache, stdout=out)
        load2 = load_average()
        warm = stateglass("state", url, "--cache-dir", cache, stdout=out)
        load3 = load_average()
        local = stateglass("state", cp, "--jobs", "1", stdout=out)
    print(f"\n### state of {keys:,} keys ({n} objects)")
    print("| run | wall (s) | LIST | GET | HEAD | cache hits | load before |")
    print("|---|---|---|---|---|---|---|")
    for name, (wall, c), ld in (
        ("cold", cold, load),
        ("cached", warm, load2),
        ("local disk, 1 job", local, load3),
    ):
        print(
            f"| {name} | {wall:.2f} | {c['list']} | {c['get']} | {c['head']} | "
            f"{c['cache_hits']} | {ld} |"
        )


def bench_incremental(client: Any, partitions: int, batches: int, cache: str) -> None:
    cp, src = ensure_checkpoint(partitions, batches)
    tmp = tempfile.mkdtemp(prefix="sg-bench-remote-")
    try:
        work = os.path.join(tmp, "checkpoint")
        shutil.copytree(cp, work)
        upload(client, work, "inc")
        url, db = f"s3://{BUCKET}/inc", os.path.join(tmp, "sg.duckdb")
        load = load_average()
        full = stateglass("collect", url, "--db", db, "--cache-dir", cache)
        before = files_of(work)
        extra = write_source_file(src, 20_000, "part-remote-extra.json")
        try:
            run_query(src, work, partitions)
        finally:
            os.remove(extra)
        after = files_of(work)
        new = {p for p, m in after.items() if before.get(p) != m}
        upload(client, work, "inc", new)
        state_new = sum(1 for p in new if p.startswith("state/") and p.split("/")[-1][0] != ".")
        visible_new = sum(1 for p in new if not p.split("/")[-1].startswith("."))
        load2 = load_average()
        inc = stateglass("collect", url, "--db", db, "--cache-dir", cache)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wall, c = inc
    target = 2 * partitions + visible_new
    print(f"\n### collect of a {partitions}-partition checkpoint ({batches} batches)")
    print("| run | wall (s) | LIST | GET | HEAD | load before |")
    print("|---|---|---|---|---|---|")
    print(
        f"| full | {full[0]:.2f} | {full[1]['list']} | {full[1]['get']} | {full[1]['head']} "
        f"| {load} |"
    )
    print(f"| one new batch | {wall:.2f} | {c['list']} | {c['get']} | {c['head']} | {load2} |")
    total = c["list"] + c["get"] + c["head"]
    print(
        f"\nnew batch: {len(new)} new objects ({visible_new} not hidden, {state_new} state "
        f"files); {total} requests, target <= 2 x {partitions} + {visible_new} = {target}: "
        f"{'met' if total <= target else 'NOT met'}"
    )


def bench_fleet(client: Any, count: int) -> None:
    from stateglass.collectors.checkpoints.discover import Limits, discover
    from stateglass.collectors.remote import COUNTS as REQUESTS
    from stateglass.collectors.remote import fs_for

    sample = os.path.join(ROOT, "sample_checkpoints", "spark-4.3", "agg-hdfs")
    parts = {
        rel: open(os.path.join(sample, rel), "rb").read()  # noqa: SIM115
        for rel in ("metadata", "offsets/0", "commits/0")
    }

    def put(i: int) -> None:
        for rel, body in parts.items():
            client.put_object(Bucket=BUCKET, Key=f"fleet/team-{i % 10}/cp-{i:04d}/{rel}", Body=body)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(count)))
    url = f"s3://{BUCKET}/fleet"
    # Serial (one LIST at a time, as before discovery listed a depth at once) and the default.
    for concurrency in (1, Limits().concurrency):
        load = load_average()
        REQUESTS.reset()
        start = time.perf_counter()
        limits = Limits(max_checkpoints=count + 10, max_seconds=600, concurrency=concurrency)
        found = discover(fs_for(url), url, limits)
        wall = time.perf_counter() - start
        print(f"\n### discovery under one prefix, {concurrency} at once (load before {load})")
        print(
            f"{len(found.checkpoints)} of {count} checkpoints found in {wall:.2f} s with "
            f"{REQUESTS.list} LIST, {REQUESTS.get} GET, {REQUESTS.head} HEAD "
            f"({found.directories} directories listed)"
        )


def bench_sql(client: Any, keys: int, workdir: str, cache: str, jobs: list[int]) -> None:
    from bench_sql import AGGREGATE, NO_LIMIT

    print(f"\n### `sql` aggregate of {keys:,} keys, 64 partitions")
    print("| provider | run | wall (s) | LIST | GET | HEAD | cache hits | load before |")
    print("|---|---|---|---|---|---|---|---|")
    for provider in ("hdfs", "rocksdb"):
        cp = checkpoint(workdir, "counter", provider, keys, 64)
        prefix = f"sql-{provider}"
        n = upload(client, cp, prefix)
        table = f"{prefix.replace('-', '_')}.op0_default"
        local_table = f"{os.path.basename(cp).replace('-', '_')}.op0_default"
        own = tempfile.mkdtemp(prefix="sg-bench-cache-", dir=os.path.dirname(cache))
        try:
            runs = []
            for j in jobs:
                load = load_average()
                query = AGGREGATE.format(t=table, extra="")
                fresh = tempfile.mkdtemp(prefix="sg-bench-cache-", dir=os.path.dirname(cache))
                try:
                    wall, c = stateglass(
                        "sql", f"s3://{BUCKET}/{prefix}", *NO_LIMIT, "--jobs", str(j),
                        "--cache-dir", fresh, "-e", query,
                    )  # fmt: skip
                finally:
                    shutil.rmtree(fresh, ignore_errors=True)
                runs.append((f"cold, --jobs {j}", wall, c, load))
            for name, root, t, extra, at in (
                ("cold", f"s3://{BUCKET}/{prefix}", table, "", own),
                ("cached", f"s3://{BUCKET}/{prefix}", table, "", own),
                (
                    "one partition, cold",
                    f"s3://{BUCKET}/{prefix}",
                    table,
                    " AND partition_id = 0",
                    cache,
                ),
                ("local disk", cp, local_table, "", own),
            ):
                load = load_average()
                query = AGGREGATE.format(t=t, extra=extra)
                wall, c = stateglass("sql", root, *NO_LIMIT, "--cache-dir", at, "-e", query)
                runs.append((name, wall, c, load))
        finally:
            shutil.rmtree(own, ignore_errors=True)
        for name, wall, c, load in runs:
            print(
                f"| {provider} ({n} objects) | {name} | {wall:.2f} | {c['list']} | {c['get']} "
                f"| {c['head']} | {c['cache_hits']} | {load} |"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--fleet", type=int, default=500)
    ap.add_argument("--sql-keys", type=int, default=1_000_000)
    ap.add_argument("--workdir", default="/work/bench-data", help="bench_sql.py's checkpoints")
    ap.add_argument(
        "--sql-jobs",
        default="",
        help="comma-separated --jobs values to time the cold sql query with (default: none)",
    )
    ap.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="hold each request this long in a proxy before moto (default 0: none)",
    )
    ap.add_argument(
        "--skip", action="append", default=[], choices=("state", "collect", "fleet", "sql")
    )
    args = ap.parse_args()
    import boto3
    from moto.server import ThreadedMotoServer

    from tests.remote.servers import Proxy

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    cache = tempfile.mkdtemp(prefix="sg-bench-cache-")
    try:
        with Proxy(endpoint, delay_s=args.latency_ms / 1000) as proxy:
            os.environ.update(
                AWS_ENDPOINT_URL=proxy.url if args.latency_ms else endpoint,
                AWS_ACCESS_KEY_ID="bench",
                AWS_SECRET_ACCESS_KEY="bench",
                AWS_DEFAULT_REGION="us-east-1",
                AWS_EC2_METADATA_DISABLED="true",
            )
            run(args, boto3.client("s3", endpoint_url=endpoint), endpoint, cache)
    finally:
        server.stop()
        shutil.rmtree(cache, ignore_errors=True)


def run(args: argparse.Namespace, client: Any, endpoint: str, cache: str) -> None:
    client.create_bucket(Bucket=BUCKET)
    print(
        f"date {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {machine()}, moto on {endpoint}, "
        f"{args.latency_ms:g} ms added to each request"
    )
    if "state" not in args.skip:
        bench_state(client, args.keys, cache)
    if "collect" not in args.skip:
        bench_incremental(client, args.partitions, args.batches, cache)
    if "fleet" not in args.skip:
        bench_fleet(client, args.fleet)
    if "sql" not in args.skip:
        jobs = [int(j) for j in args.sql_jobs.split(",") if j]
        bench_sql(client, args.sql_keys, args.workdir, cache, jobs)


if __name__ == "__main__":
    main()
