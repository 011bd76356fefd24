"""Session fixtures for the remote tests: moto's S3 server on 127.0.0.1 with the sample
checkpoints uploaded, and a CLI runner that captures what a user would see."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SAMPLES

# Every provider and shape once: HDFS (with Spark's .crc sidecars kept), RocksDB changelog
# checkpointing, a stream-stream join (four stores), transformWithState (state variables).
REMOTE_SAMPLES = (
    "spark-4.3/agg-hdfs",
    "spark-4.3/agg-rocks-cl",
    "spark-4.3/join-hdfs",
    "spark-4.3/tws-rocks-cl",
)
BUCKET = "cps"


@dataclass(frozen=True)
class S3:
    endpoint: str
    client: Any
    # Local copies made with the upload, so that file times are as recent as the remote ones.
    copies: Path

    def url(self, sample: str) -> str:
        return f"s3://{BUCKET}/samples/{sample}"

    def local(self, sample: str) -> str:
        return str(self.copies / sample)


def upload(client: Any, bucket: str, local: Path, prefix: str, crc: bool = True) -> int:
    files = [p for p in sorted(local.rglob("*")) if p.is_file() and (crc or p.suffix != ".crc")]

    def put(path: Path) -> None:
        key = f"{prefix}/{path.relative_to(local).as_posix()}"
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put, files))
    return len(files)


@pytest.fixture(scope="session")
def s3(moto_aws: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    """moto's S3 on a free loopback port (the session's one moto server); the environment
    points every client at it through ``AWS_ENDPOINT_URL``, as a user of MinIO or an on-prem
    S3 would."""
    import boto3

    endpoint = moto_aws
    saved = os.environ.get("STATEGLASS_CACHE_DIR")
    os.environ["STATEGLASS_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    try:
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket=BUCKET)
        copies = tmp_path_factory.mktemp("copies")
        for i, sample in enumerate(REMOTE_SAMPLES):
            upload(client, BUCKET, SAMPLES / sample, f"samples/{sample}", crc=i == 0)
            # copyfile, not copy2: new mtimes, as the upload gives the objects.
            shutil.copytree(SAMPLES / sample, copies / sample, copy_function=shutil.copyfile)
        yield S3(endpoint, client, copies)
    finally:
        if saved is None:
            os.environ.pop("STATEGLASS_CACHE_DIR", None)
        else:
            os.environ["STATEGLASS_CACHE_DIR"] = saved


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capfd: pytest.CaptureFixture[str]) -> Any:
    """Run ``stateglass ARGS`` in this process; returns exit code, stdout and stderr."""
    from stateglass.app.cli import main
    from stateglass.collectors.remote import COUNTS

    def run(*args: str) -> Result:
        capfd.readouterr()
        COUNTS.reset()
        code = main(list(args))
        out, err = capfd.readouterr()
        return Result(code, out, err)

    return run
