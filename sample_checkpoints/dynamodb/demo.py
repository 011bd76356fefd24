"""The DynamoDB sample: a checkpoint plus its tables exported as one JSON file, and the demo.

``sample.tar.gz`` holds the checkpoint of the aggregation in queries.py (its state lives in
DynamoDB, so the directory has only Spark's logs, schemas and ``_dynamodb.json``);
``tables.json`` holds both tables' items in DynamoDB's JSON (binary as base64). Nothing of
ours serves them: :func:`served` starts moto's DynamoDB server on 127.0.0.1 and loads the
export, and the dashboard reads the checkpoint with ``AWS_ENDPOINT_URL`` pointing at it (the
standard AWS chain, dummy credentials); the server stops with the dashboard.

    .venv/bin/python sample_checkpoints/dynamodb/demo.py dashboard -- sample_checkpoints  # make run
    .venv/bin/python sample_checkpoints/dynamodb/demo.py run        # make run-dynamodb: it alone
    .venv/bin/python sample_checkpoints/dynamodb/demo.py generate   # rewrite the sample (Java)
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TABLES = HERE / "tables.json"
ARCHIVE = HERE / "sample.tar.gz"
PREFIX = "demo"
CHECKPOINT = "dynamodb-agg"
# Dummy credentials moto accepts; named so that a test can tell they appear nowhere.
LOCAL_ENV = {
    "AWS_ACCESS_KEY_ID": "stateglass-demo-key-id",
    "AWS_SECRET_ACCESS_KEY": "stateglass-demo-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}


def _encode(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"__b64__": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__b64__"}:
            return base64.b64decode(value["__b64__"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def export_tables(client: Any, prefix: str) -> dict[str, Any]:
    """Both tables of ``prefix``: key schema and every item, sorted for a stable file."""
    out = []
    for table in (f"{prefix}_state", f"{prefix}_snapshot"):
        desc = client.describe_table(TableName=table)["Table"]
        items: list[Any] = []
        for page in client.get_paginator("scan").paginate(TableName=table):
            items += page["Items"]
        items.sort(key=lambda i: json.dumps(_encode(i), sort_keys=True))
        out.append(
            {
                "TableName": table,
                "KeySchema": desc["KeySchema"],
                "AttributeDefinitions": desc["AttributeDefinitions"],
                "Items": _encode(items),
            }
        )
    return {"tables": out}


def load_tables(client: Any, doc: dict[str, Any]) -> int:
    """Create the exported tables and put their items; the number of items."""
    count = 0
    for table in doc["tables"]:
        client.create_table(
            TableName=table["TableName"],
            KeySchema=table["KeySchema"],
            AttributeDefinitions=table["AttributeDefinitions"],
            BillingMode="PAY_PER_REQUEST",
        )
        items = _decode(table["Items"])
        for i in range(0, len(items), 25):
            batch = [{"PutRequest": {"Item": item}} for item in items[i : i + 25]]
            client.batch_write_item(RequestItems={table["TableName"]: batch})
        count += len(items)
    return count


def unpack(target: Path) -> Path:
    """The sample checkpoint, unpacked under ``target``."""
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(target, filter="data")
    return target / CHECKPOINT


def generate() -> None:
    """Run the aggregation on the provider against moto, then write the archive and export."""
    import boto3
    from moto.server import ThreadedMotoServer

    sys.path.insert(0, str(HERE))
    import queries  # type: ignore[import-not-found]
    from pyspark.sql import SparkSession

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.update(LOCAL_ENV, AWS_ENDPOINT_URL=endpoint)
    with tempfile.TemporaryDirectory() as tmp:
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
        try:
            queries.load_jar(spark, queries.build_jar(Path(tmp) / "jar"))
            system = spark.sparkContext._jvm.java.lang.System
            system.setProperty("aws.accessKeyId", "testing")
            system.setProperty("aws.secretAccessKey", "testing")
            src = queries.write_batches(Path(tmp) / "src", queries.aggregation_batches())
            with queries.provider_confs(spark, endpoint, PREFIX):
                queries.run_aggregation(spark, src, Path(tmp) / CHECKPOINT).awaitTermination()
        finally:
            spark.stop()
        with tarfile.open(ARCHIVE, "w:gz") as tar:
            tar.add(Path(tmp) / CHECKPOINT, arcname=CHECKPOINT)
        doc = export_tables(boto3.client("dynamodb"), PREFIX)
        TABLES.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    server.stop()


class MotoMissing(RuntimeError):
    """moto (requirements.txt) is not installed: the sample cannot be served."""


@contextmanager
def served(workdir: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """moto's DynamoDB server on 127.0.0.1 with the export loaded, and the checkpoint unpacked
    into ``workdir``: yields the checkpoint and the environment that points the AWS chain at
    the server (dummy credentials). The server stops when the block ends.

        with served(Path(".stateglass/dynamodb")) as (checkpoint, env):
            subprocess.call(["stateglass", "info", str(checkpoint)], env={**os.environ, **env})
    """
    import logging

    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        raise MotoMissing(
            f"the DynamoDB sample is not shown: {exc.name} is not installed "
            "(.venv/bin/pip install -r requirements.txt)"
        ) from None
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # not a line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, moto_port = server.get_host_and_port()
        env = dict(LOCAL_ENV, AWS_ENDPOINT_URL=f"http://{host}:{moto_port}")
        session = boto3.session.Session(
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_DEFAULT_REGION"],
        )
        client = session.client("dynamodb", endpoint_url=env["AWS_ENDPOINT_URL"])
        load_tables(client, json.loads(TABLES.read_text()))
        # Afresh each time, with the archive's file times: a re-collect finds nothing new.
        shutil.rmtree(workdir / CHECKPOINT, ignore_errors=True)
        yield unpack(workdir), env
    finally:
        server.stop()


def dashboard(args: list[str], workdir: Path) -> int:
    """``stateglass dashboard ARGS`` with the DynamoDB sample added, served by moto for as
    long as the dashboard runs; without moto, the other paths alone and one line why."""
    stateglass = [sys.executable, "-m", "stateglass.app.cli", "dashboard"]
    try:
        with served(workdir) as (checkpoint, env):
            print(f"DynamoDB sample: moto's DynamoDB on {env['AWS_ENDPOINT_URL']}", flush=True)
            # The checkpoint first: the dashboard's paths come before its options.
            return _wait([*stateglass, str(checkpoint), *args], dict(os.environ, **env))
    except MotoMissing as exc:
        print(exc, file=sys.stderr, flush=True)
        return _wait([*stateglass, *args], dict(os.environ))


def _wait(command: list[str], env: dict[str, str]) -> int:
    """Run the dashboard to its end. Ctrl+C reaches it from the terminal (our process group):
    we wait for its own clean-up; a SIGTERM to us is passed on to it."""
    proc = subprocess.Popen(command, env=env)
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    old_term = signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    try:
        return proc.wait()
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("dashboard", "run", "generate"))
    parser.add_argument("--port", type=int, default=8502, help="run: the dashboard's port")
    parser.add_argument(
        "--workdir",
        default=None,
        help="dashboard: where to unpack the checkpoint (kept, so that the database's cards "
        "stay those of one path)",
    )
    # dashboard: what follows ``--`` is stateglass dashboard's own arguments.
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    if args.what == "generate":
        generate()
        return 0
    if args.what == "dashboard":
        return dashboard(argv[cut + 1 :], Path(args.workdir or ".stateglass/dynamodb"))
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "dynamodb.duckdb")
        return dashboard(["--db", db, "--port", str(args.port)], Path(tmp))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
