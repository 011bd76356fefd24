"""Storage failures against real servers: each is one line naming the URL, exit status 2, the
database as it was; secrets never reach output, the database or a report."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.remote.conftest import S3
from tests.remote.servers import Proxy

SAMPLE = "spark-4.3/agg-hdfs"
OTHER = "spark-4.3/agg-rocks-cl"
# Two attempts, not five: the failures below are meant to last, and the test should not wait.
FEW_RETRIES = ("--storage-option", "config_kwargs.retries.max_attempts=2")


@pytest.fixture
def short_backoffs(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore waits a jittered 2**n s before each retry, seconds per failing file here; the
    retries, their number and the error that ends them are what these tests prove, not the
    wait. A hundredth of it, in this process only (the CLI runs in-process)."""
    from botocore.retries.standard import ExponentialBackoff

    delay = ExponentialBackoff.delay_amount
    monkeypatch.setattr(
        ExponentialBackoff, "delay_amount", lambda self, context: delay(self, context) / 100
    )


def _dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    with duckdb.connect(str(db), read_only=True) as conn:
        tables = [t for (t,) in conn.execute("SHOW TABLES").fetchall()]
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if not ln.startswith("stateglass: requests:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_missing_bucket(s3: S3, cli: Any) -> None:
    r = cli("info", "s3://no-such-bucket/checkpoints/orders")
    assert r.code == 2
    assert _one_line(r.err) == (
        "stateglass: error: s3://no-such-bucket/checkpoints/orders: no such bucket or container"
    )


def test_missing_checkpoint_in_a_bucket(s3: S3, cli: Any) -> None:
    r = cli("state", "s3://cps/samples/nothing-here")
    assert r.code == 2
    assert "s3://cps/samples/nothing-here: no such" in _one_line(r.err)


def test_an_option_the_client_does_not_take_is_one_line(s3: S3, cli: Any) -> None:
    # s3fs makes its client at the first request, with the options as keyword arguments.
    r = cli("info", s3.url("spark-4.3/agg-hdfs"), "--storage-option", "client_kwargs.bad=1")
    assert r.code == 2
    assert "a storage option the client does not take" in _one_line(r.err)


def test_secrets_never_reach_output_db_or_report(s3: S3, cli: Any, tmp_path: Path) -> None:
    user, in_url, in_query, option = (
        "AKIAUSERPART",
        "URLSECRET-1x9",
        "QUERYTOKEN-7q2",
        "OPTSECRET-4k8",
    )
    url = f"s3a://{user}:{in_url}@cps/samples/{SAMPLE}/?X-Amz-Signature={in_query}"
    db, report = tmp_path / "sg.duckdb", tmp_path / "r.md"
    opts = ("--storage-option", "key=testing", "--storage-option", f"secret={option}")
    outputs = [
        cli("collect", url, "--db", str(db), *opts, "--verbose"),
        cli("info", url, *opts),
        cli("report", url, "--db", str(db), "-o", str(report), *opts),
        cli("check", url, "--db", str(db), *opts),
        # Failing ones print the URL in their error line.
        cli("info", url.replace("@cps/", "@no-such-bucket/"), *opts),
        cli("state", url.replace(SAMPLE, "nothing"), *opts),
    ]
    assert [o.code for o in outputs[:2]] == [0, 0] and outputs[4].code == 2
    assert "s3://cps/samples/spark-4.3/agg-hdfs" in outputs[1].out  # canonical, s3a read as s3
    texts = [o.out + o.err for o in outputs] + [report.read_text()]
    blobs = [db.read_bytes()] + [p.read_bytes() for p in tmp_path.glob("sg.duckdb*")]
    for secret in (user, in_url, in_query, option):
        assert not any(secret in t for t in texts), secret
        assert not any(secret.encode() in b for b in blobs), secret
    with duckdb.connect(str(db), read_only=True) as conn:
        assert conn.execute("SELECT checkpoint FROM checkpoints").fetchall() == [
            (f"s3://cps/samples/{SAMPLE}",)
        ]


def test_connection_lost_mid_scan_leaves_the_database_as_it_was(
    s3: S3, cli: Any, tmp_path: Path, short_backoffs: None
) -> None:
    from stateglass.collectors.remote import COUNTS

    db, clean = tmp_path / "sg.duckdb", tmp_path / "clean.duckdb"
    assert cli("collect", s3.url(OTHER), "--db", str(db)).code == 0
    before = _dump(db)
    # No cache in this test: every file read is a request, the same in both scans.
    assert cli("collect", s3.url(SAMPLE), "--db", str(clean), "--cache-size", "0").code == 0
    full = COUNTS.list + COUNTS.get + COUNTS.head
    assert full > 20
    with Proxy(s3.endpoint) as proxy:
        os.environ["AWS_ENDPOINT_URL"] = proxy.url
        try:
            proxy.cut_after = full // 2
            r = cli("collect", s3.url(SAMPLE), "--db", str(db), "--cache-size", "0", *FEW_RETRIES)
        finally:
            os.environ["AWS_ENDPOINT_URL"] = s3.endpoint
    assert r.code == 2
    line = _one_line(r.err)
    assert line.startswith(f"stateglass: error: s3://cps/samples/{SAMPLE}")
    assert "connection lost" in line
    assert proxy.forwarded == full // 2  # cut in the middle of the scan, not at its start
    assert _dump(db) == before  # nothing of the half-read checkpoint was recorded
    # The connection is back: the next scan picks up cleanly.
    assert cli("collect", s3.url(SAMPLE), "--db", str(db)).code == 0
    after, alone = _dump(db), _dump(clean)
    for table in ("batches", "state_versions", "state_files", "problems"):
        rows = [r for r in after[table] if f"samples/{SAMPLE}" in str(r[0])]
        assert len(rows) == len(alone[table]), table
    assert len(alone["state_versions"]) > 0


def test_throttling_is_retried_then_reported(s3: S3, cli: Any, short_backoffs: None) -> None:
    with Proxy(s3.endpoint) as proxy:
        os.environ["AWS_ENDPOINT_URL"] = proxy.url
        try:
            proxy.throttle = 3  # three 503 SlowDown answers, then the real ones
            ok = cli("info", s3.url(SAMPLE))
            assert ok.code == 0, ok.err
            assert proxy.throttle == 0
            proxy.throttle = 10_000
            r = cli("info", s3.url(SAMPLE), *FEW_RETRIES)
        finally:
            os.environ["AWS_ENDPOINT_URL"] = s3.endpoint
    assert r.code == 2
    assert _one_line(r.err) == (
        f"stateglass: error: s3://cps/samples/{SAMPLE}: still throttled by the store after "
        "retries; try later"
    )
