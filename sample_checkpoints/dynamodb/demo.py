"""The DynamoDB sample: a checkpoint plus its tables exported as one JSON file, and the demo.

``sample.tar.gz`` holds the checkpoint of the aggregation in queries.py (its state lives in
DynamoDB, so the directory has only Spark's logs, schemas and ``_dynamodb.json``);
``tables.json`` holds both tables' items in DynamoDB's JSON (binary as base64). Nothing of
ours serves them: ``run`` starts moto's DynamoDB server on 127.0.0.1, loads the export and
opens the dashboard on the checkpoint with ``AWS_ENDPOINT_URL`` pointing at it.

    .venv/bin/python sample_checkpoints/dynamodb/demo.py run        # make run-dynamodb
    .venv/bin/python sample_checkpoints/dynamodb/demo.py generate   # rewrite the sample (Java)
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TABLES = HERE / "tables.json"
ARCHIVE = HERE / "sample.tar.gz"
PREFIX = "demo"
LOCAL_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
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
    return target / "dynamodb-agg"


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
                queries.run_aggregation(spark, src, Path(tmp) / "dynamodb-agg")
        finally:
            spark.stop()
        with tarfile.open(ARCHIVE, "w:gz") as tar:
            tar.add(Path(tmp) / "dynamodb-agg", arcname="dynamodb-agg")
        doc = export_tables(boto3.client("dynamodb"), PREFIX)
        TABLES.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    server.stop()


def run(port: int) -> int:
    """moto on loopback with the export loaded, and the dashboard on the sample checkpoint."""
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # not a line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, moto_port = server.get_host_and_port()
    os.environ.update(LOCAL_ENV, AWS_ENDPOINT_URL=f"http://{host}:{moto_port}")
    env = dict(os.environ)
    try:
        client = boto3.client("dynamodb")
        load_tables(client, json.loads(TABLES.read_text()))
        with tempfile.TemporaryDirectory() as tmp:
            cp = unpack(Path(tmp))
            db = str(Path(tmp) / "dynamodb.duckdb")
            stateglass = Path(sys.executable).with_name("stateglass")
            cmd = [str(stateglass), "dashboard", str(cp), "--db", db, "--port", str(port)]
            return subprocess.call(cmd, env=env)
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("run", "generate"))
    parser.add_argument("--port", type=int, default=8502)
    args = parser.parse_args()
    if args.what == "generate":
        generate()
        return 0
    return run(args.port)


if __name__ == "__main__":
    sys.exit(main())
