"""The SQL catalog over a fleet on S3: how long opening a session over N checkpoints takes.

Usage::

    .venv/bin/python benchmarks/bench_sql_fleet.py [--fleet 500] [--runs 2]

moto's S3 server runs in a child process on 127.0.0.1, filled through its backend with
``--fleet`` copies of the last batch of ``spark-4.3/agg-hdfs`` (13 objects each). Each run
is ``stateglass sql s3://…/fleet --tables`` as a user runs it (a whole process, its wall
time and the requests ``--verbose`` counts), then ``SELECT count(*)`` on one checkpoint.
``--latency-ms`` holds each request that long in a proxy before moto, as an object store's
round trip would.
Every figure is printed with the load average before it; the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

BUCKET = "fleet"
COUNTS = re.compile(r"requests: (\d+) LIST, (\d+) GET, (\d+) HEAD")

# The child: moto in its own process, filled through its backend (HTTP PUTs of thousands of
# objects take minutes), serving until its stdin closes.
SERVER = """
import logging
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from moto.server import ThreadedMotoServer
from tests.remote.servers import fill_fleet, last_batch_files
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends
logging.getLogger("werkzeug").setLevel(logging.ERROR)  # not a line per request
server = ThreadedMotoServer(ip_address="127.0.0.1", port={port}, verbose=False)
server.start()
s3_backends[DEFAULT_ACCOUNT_ID]["global"].create_bucket({bucket!r}, "us-east-1")
files = last_batch_files(Path({sample!r}))
fill_fleet({bucket!r}, files, [f"fleet/job-{{i:04d}}" for i in range({fleet})])
print("ready", flush=True)
sys.stdin.read()
server.stop()
"""


def load_average() -> float:
    return os.getloadavg()[0]


def start_server(fleet: int) -> tuple[subprocess.Popen[str], str]:
    from tests.remote.servers import free_port

    port = free_port()
    sample = os.path.join(ROOT, "sample_checkpoints", "spark-4.3", "agg-hdfs")
    code = SERVER.format(root=ROOT, port=port, bucket=BUCKET, sample=sample, fleet=fleet)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit("moto did not start")
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    return proc, f"http://127.0.0.1:{port}"


def stateglass(env: dict[str, str], *args: str) -> tuple[float, str]:
    """One CLI run as a user runs it: wall time and the request counts of ``--verbose``."""
    exe = shutil.which("stateglass", path=os.path.dirname(sys.executable)) or "stateglass"
    start = time.perf_counter()
    proc = subprocess.run(
        [exe, *args, "--verbose"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"stateglass {' '.join(args)} failed:\n{proc.stderr}")
    found = COUNTS.search(proc.stderr)
    counts = f"{found[1]} LIST, {found[2]} GET, {found[3]} HEAD" if found else "?"
    return wall, counts


def main() -> None:
    from tests.remote.servers import Proxy, env_for

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", type=int, default=500)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    started = time.perf_counter()
    proc, endpoint = start_server(args.fleet)
    print(f"moto filled with {args.fleet} checkpoints in {time.perf_counter() - started:.1f} s")
    url = f"s3://{BUCKET}/fleet"
    print(f"{args.latency_ms:g} ms added to each request")
    try:
        with (
            tempfile.TemporaryDirectory() as cache,
            Proxy(endpoint, delay_s=args.latency_ms / 1000) as proxy,
        ):
            served = proxy.url if args.latency_ms else endpoint
            env = {**os.environ, **env_for(served), "STATEGLASS_CACHE_DIR": cache}
            for run in range(args.runs):
                load = load_average()
                wall, counts = stateglass(env, "sql", url, "--tables", "--format", "jsonl")
                print(f"run {run + 1}: --tables {wall:.2f} s ({counts}), load {load:.1f}")
                load = load_average()
                sql = "SELECT count(*) FROM job_0007.op0_default"
                wall, counts = stateglass(env, "sql", url, "-e", sql)
                print(f"run {run + 1}: one query {wall:.2f} s ({counts}), load {load:.1f}")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)


if __name__ == "__main__":
    main()
