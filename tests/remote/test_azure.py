"""ADLS / Blob through adlfs against Azurite (Microsoft's emulator, from npm) on 127.0.0.1.

Azurite emulates the Blob endpoint only: adlfs reads ``abfss://`` URLs through it with a
flat namespace (directories are name prefixes), as it does a Gen2 account.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.remote.conftest import SAMPLES
from tests.remote.servers import AZURITE_ACCOUNT, AZURITE_KEY, azurite

HOST = f"{AZURITE_ACCOUNT}.dfs.core.windows.net"
AZ_SAMPLES = ("spark-4.3/agg-hdfs", "spark-4.3/agg-rocks-cl")


@pytest.fixture(scope="module")
def blob(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Azurite with the samples in container ``cps``; yields (connection string, local copies)."""
    import adlfs

    if shutil.which("azurite-blob") is None:
        pytest.fail("azurite-blob is missing: npm install -g azurite (.ci/run installs it)")
    copies = tmp_path_factory.mktemp("az-copies")
    with azurite(tmp_path_factory.mktemp("azurite")) as conn:
        fs = adlfs.AzureBlobFileSystem(connection_string=conn)
        fs.mkdir("cps")
        for sample in AZ_SAMPLES:
            shutil.copytree(SAMPLES / sample, copies / sample, copy_function=shutil.copyfile)
            fs.put(str(copies / sample), f"cps/samples/{sample}", recursive=True)
        yield conn, copies


def _url(sample: str, container: str = "cps") -> str:
    return f"abfss://{container}@{HOST}/samples/{sample}"


@pytest.mark.parametrize("sample", AZ_SAMPLES)
def test_commands_match_the_local_copy(sample: str, blob: tuple[str, Path], cli: Any) -> None:
    conn, copies = blob
    local, remote, opt = str(copies / sample), _url(sample), f"connection_string={conn}"
    for args in (("info", "--json"), ("state",), ("changes", "--from", "3")):
        a = cli(args[0], local, *args[1:])
        b = cli(args[0], remote, *args[1:], "--storage-option", opt)
        assert (a.code, b.code) == (0, 0), b.err
        assert b.out.replace(remote, local) == a.out
        assert AZURITE_KEY not in b.out + b.err


def test_wrong_key_is_one_line_without_the_key(blob: tuple[str, Path], cli: Any) -> None:
    conn, _ = blob
    wrong = "A" * 86 + "=="  # well-formed base64, not the account's key
    r = cli(
        "info",
        _url("spark-4.3/agg-hdfs"),
        "--storage-option",
        f"connection_string={conn.replace(AZURITE_KEY, wrong)}",
    )
    assert r.code == 2
    assert r.err.strip() == (
        f"stateglass: error: {_url('spark-4.3/agg-hdfs')}: credentials missing or rejected: "
        "check the environment, profile or --storage-option keys for this store"
    )
    assert wrong not in r.err


def test_access_denied_with_a_write_only_sas(blob: tuple[str, Path], cli: Any) -> None:
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    conn, _ = blob
    sas = generate_container_sas(
        AZURITE_ACCOUNT,
        "cps",
        account_key=AZURITE_KEY,
        permission=ContainerSasPermissions(write=True),  # no read, no list
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    endpoint = re.search(r"BlobEndpoint=[^;]+;", conn)
    assert endpoint is not None
    sas_conn = f"{endpoint.group(0)}SharedAccessSignature={sas}"
    r = cli("info", _url("spark-4.3/agg-hdfs"), "--storage-option", f"connection_string={sas_conn}")
    assert r.code == 2
    assert r.err.strip() == (
        f"stateglass: error: {_url('spark-4.3/agg-hdfs')}: access denied: the credentials may "
        "not read this path"
    )
    sig = re.search(r"sig=([^&]+)", sas)
    assert sig is not None and sig.group(1) not in r.err


def test_missing_container(blob: tuple[str, Path], cli: Any) -> None:
    conn, _ = blob
    url = _url("spark-4.3/agg-hdfs", container="nothere")
    r = cli("info", url, "--storage-option", f"connection_string={conn}")
    assert r.code == 2
    assert r.err.strip() == f"stateglass: error: {url}: no such bucket or container"
