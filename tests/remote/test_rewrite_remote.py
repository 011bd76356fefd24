"""``stateglass rewrite`` to an ``s3://`` DST (moto on 127.0.0.1): staged and self-checked
locally, uploaded with Spark's ``metadata`` last (the order moto's request log shows), read
back through S3 with ``stateglass state``; a non-empty prefix is refused, and a killed upload's
leftovers are removed only when their owner process is gone."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.rewrite.object_store import OWNER_KEY
from stateglass.collectors.rewrite.owner import OwnerMark
from tests.conftest import SAMPLES, copy_until
from tests.remote.conftest import BUCKET, S3
from tests.remote.servers import served_requests

pytestmark = pytest.mark.usefixtures("s3")


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_until(SAMPLES / "spark-4.3" / "agg-hdfs", tmp_path_factory.mktemp("rw") / "src", 3)


def _keys(s3: S3, prefix: str) -> list[str]:
    listing = s3.client.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/")
    return sorted(o["Key"].removeprefix(prefix + "/") for o in listing.get("Contents", []))


def _dead_process_mark() -> OwnerMark:
    """The mark a rewrite killed on this host leaves: its process is gone."""
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    return OwnerMark(socket.gethostname(), finished.pid, "0")


def test_a_rewrite_to_s3_uploads_metadata_last_and_reads_back(
    s3: S3, src: Path, tmp_path: Path, cli: Any
) -> None:
    url = f"s3://{BUCKET}/rewrites/agg-3"
    with served_requests() as served:
        done = cli("rewrite", str(src), url, "--partitions", "3", "--apply")
    assert done.code == 0, done.err
    puts = [target for method, target in served.requests if method == "PUT"]
    assert puts[0].endswith(f"/agg-3/{OWNER_KEY}") and puts[-1].endswith("/agg-3/metadata")
    local = cli("rewrite", str(src), str(tmp_path / "agg-3"), "--partitions", "3", "--apply")
    assert local.code == 0, local.err
    assert _keys(s3, "rewrites/agg-3") == sorted(
        p.relative_to(tmp_path / "agg-3").as_posix()
        for p in (tmp_path / "agg-3").rglob("*")
        if p.is_file()
    )
    remote_rows = cli("state", url)
    local_rows = cli("state", str(tmp_path / "agg-3"))
    assert remote_rows.code == 0, remote_rows.err
    assert sorted(remote_rows.out.splitlines()) == sorted(local_rows.out.splitlines())
    assert remote_rows.out.count("\n") > 3


def test_a_prefix_that_is_not_empty_is_refused(s3: S3, src: Path, cli: Any) -> None:
    s3.client.put_object(Bucket=BUCKET, Key="rewrites/taken/keep", Body=b"mine")
    url = f"s3://{BUCKET}/rewrites/taken"
    done = cli("rewrite", str(src), url, "--partitions", "3", "--apply")
    assert done.code == 2 and done.err.count("\n") == 1 and "not empty" in done.err
    assert _keys(s3, "rewrites/taken") == ["keep"]


def test_a_killed_uploads_leftovers_are_removed_only_when_their_process_is_gone(
    s3: S3, src: Path, cli: Any
) -> None:
    url = f"s3://{BUCKET}/rewrites/killed"
    half = {"offsets/0": b"v1\n{}", "state/0/0/3.snapshot": b"cut"}
    for key, body in half.items():
        s3.client.put_object(Bucket=BUCKET, Key=f"rewrites/killed/{key}", Body=body)
    owner = f"rewrites/killed/{OWNER_KEY}"
    s3.client.put_object(Bucket=BUCKET, Key=owner, Body=OwnerMark.of_this_process().to_bytes())
    running = cli("rewrite", str(src), url, "--partitions", "3", "--apply")
    assert running.code == 2 and "not empty" in running.err
    assert _keys(s3, "rewrites/killed") == sorted([*half, OWNER_KEY])
    s3.client.put_object(Bucket=BUCKET, Key=owner, Body=_dead_process_mark().to_bytes())
    done = cli("rewrite", str(src), url, "--partitions", "3", "--apply")
    assert done.code == 0, done.err
    keys = _keys(s3, "rewrites/killed")
    assert "metadata" in keys and OWNER_KEY not in keys and "state/0/0/3.snapshot" in keys
    body = s3.client.get_object(Bucket=BUCKET, Key="rewrites/killed/state/0/0/3.snapshot")
    assert body["Body"].read() != b"cut"
