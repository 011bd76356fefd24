""" "Inside a checkpoint?" behind a URL: the layout is read on the bucket, known roots are
compared in their canonical spelling, and local and remote paths never contain each other."""

from __future__ import annotations

from stateglass.collectors.checkpoints.enclosing import enclosing_checkpoint
from tests.remote.conftest import BUCKET, S3


def test_layout_on_the_bucket(s3: S3) -> None:
    root = s3.url("spark-4.3/agg-hdfs")
    assert enclosing_checkpoint(f"{root}/state/0/0") == root
    assert enclosing_checkpoint(f"{root}/eventlogs") == root
    assert enclosing_checkpoint(f"s3://{BUCKET}/samples/spark-4.3") is None
    assert enclosing_checkpoint(f"s3://{BUCKET}/elsewhere/logs") is None


def test_known_roots_in_any_spelling(s3: S3) -> None:
    known = f"s3a://{BUCKET}//samples/new-query/"
    assert enclosing_checkpoint(f"s3://{BUCKET}/samples/new-query/x", [known]) == known
    assert enclosing_checkpoint(f"s3://{BUCKET}/samples/new-query-2/x", [known]) is None
    local = s3.local("spark-4.3/agg-hdfs")
    assert enclosing_checkpoint(f"{local}/x", [known]) == local  # by its layout, not the URL
    assert enclosing_checkpoint(f"s3://{BUCKET}/elsewhere", [local]) is None
