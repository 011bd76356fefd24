"""URLs to locations (pure), storage options, and the one-line answers when a backend cannot
be used at all."""

from __future__ import annotations

from typing import Any

import pytest

from stateglass.collectors.remote.settings import parse_options, parse_size
from stateglass.collectors.remote.urls import parse_location, redact


@pytest.mark.parametrize(
    ("url", "backend", "canonical", "key"),
    [
        pytest.param("s3://b/cp/", "s3", "s3://b/cp", "b/cp", id="s3"),
        pytest.param("s3a://AK:SECRET@b//cp?x=1#f", "s3", "s3://b/cp", "b/cp", id="s3a-userinfo"),
        pytest.param("s3n://b/cp", "s3", "s3://b/cp", "b/cp", id="s3n"),
        pytest.param("gs://b/a/cp", "gs", "gs://b/a/cp", "b/a/cp", id="gs"),
        pytest.param(
            "abfs://box@acct.dfs.core.windows.net/cp?sv=1&sig=S",
            "abfs",
            "abfss://box@acct.dfs.core.windows.net/cp",
            "box/cp",
            id="abfs-account",
        ),
        pytest.param(
            "hdfs://nn:8020/user/cp", "hdfs", "hdfs://nn:8020/user/cp", "/user/cp", id="hdfs"
        ),
        pytest.param("file:///tmp/x/../cp", "local", "/tmp/cp", "/tmp/cp", id="file"),
        pytest.param("/tmp/cp/", "local", "/tmp/cp", "/tmp/cp", id="plain"),
    ],
)
def test_locations(url: str, backend: str, canonical: str, key: str) -> None:
    loc = parse_location(url)
    assert (loc.backend, loc.canonical, loc.key) == (backend, canonical, key)
    assert "SECRET" not in loc.canonical and "sig=" not in loc.canonical


def test_account_from_the_abfs_host() -> None:
    assert parse_location("abfss://c@myacct.dfs.core.windows.net/p").account == "myacct"


def test_unknown_scheme() -> None:
    with pytest.raises(ValueError, match="unknown URL scheme ftp://"):
        parse_location("ftp://host/cp")


def test_options_parse_and_nest() -> None:
    opts = parse_options(["anon=true", "client_kwargs.region_name=eu-west-1", "key=k=v"])
    assert opts == {"anon": True, "client_kwargs": {"region_name": "eu-west-1"}, "key": "k=v"}
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        parse_options(["novalue"])


def test_redact_secret_looking_values() -> None:
    opts = {
        "secret": "s3cr3t-value",
        "client_kwargs": {"aws_session_token": "tok-123"},
        "region": "eu-west-1",
    }
    assert redact("bad s3cr3t-value tok-123 eu-west-1", opts) == "bad *** *** eu-west-1"


def test_sizes() -> None:
    assert parse_size("2GiB") == 2 << 30 and parse_size("500MB") == 500 << 20
    assert parse_size("0") == 0
    with pytest.raises(ValueError):
        parse_size("lots")


def test_hdfs_without_a_hadoop_client(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    monkeypatch.delenv("ARROW_LIBHDFS_DIR", raising=False)
    r = cli("info", "hdfs://127.0.0.1:9000/user/spark/cp")
    assert r.code == 2
    assert r.err.startswith(
        "stateglass: error: hdfs://127.0.0.1:9000/user/spark/cp: no Hadoop client here"
    )
    assert len(r.err.strip().splitlines()) == 1


def test_a_bad_storage_option_is_one_line(cli: Any) -> None:
    r = cli("info", "s3://b/cp", "--storage-option", "oops")
    assert r.code == 2 and r.err.strip() == (
        "stateglass: error: --storage-option 'oops': expected KEY=VALUE"
    )


def test_a_lost_connection_is_not_taken_for_access_denied_by_a_port_in_its_url() -> None:
    """The client's message names the endpoint: a port such as 40311 holds "403"."""
    from botocore.exceptions import EndpointConnectionError

    from stateglass.collectors.remote.failures import storage_error

    lost = EndpointConnectionError(endpoint_url="http://127.0.0.1:40311/cps/state/0/403/6.delta")
    assert "connection lost" in storage_error("s3://cps/x", lost, {}).why
    denied = OSError("An error occurred (403) when calling the HeadObject operation: Forbidden")
    assert "access denied" in storage_error("s3://cps/x", denied, {}).why
