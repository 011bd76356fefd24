"""One factory per storage backend, and the registry that maps a URL's backend to it.

Each client library is imported only when a URL of its scheme is opened; a missing one is a
one-line :class:`~collectors.errors.BackendMissing` with the command that installs it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from stateglass.collectors.errors import BackendMissing
from stateglass.collectors.remote.urls import Location


def _module(name: str, url: str, extra: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        package = name.split(".", 1)[0]
        raise BackendMissing(
            url, f"needs the {package} package: pip install 'stateglass[{extra}]'"
        ) from exc


def _s3(loc: Location, options: dict[str, Any]) -> Any:
    s3fs = _module("s3fs", loc.canonical, "s3")
    config = options.setdefault("config_kwargs", {})
    # botocore's standard mode retries throttling (SlowDown, 503) and dropped connections
    # with exponential backoff; s3fs retries again around it, so its own loop is kept short
    # (2 × 4 attempts at most, not 5 × 5).
    retries = config.setdefault("retries", {})
    retries.setdefault("max_attempts", 4)
    retries.setdefault("mode", "standard")
    # One GET per file: with concurrency s3fs first sends a HEAD to size its range requests.
    options.setdefault("max_concurrency", 1)
    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **options)
    fs.retries = 2
    return fs


def _gs(loc: Location, options: dict[str, Any]) -> Any:
    gcsfs = _module("gcsfs", loc.canonical, "gcs")
    return gcsfs.GCSFileSystem(skip_instance_cache=True, **options)


def _abfs(loc: Location, options: dict[str, Any]) -> Any:
    adlfs = _module("adlfs", loc.canonical, "azure")
    if loc.account and "connection_string" not in options:
        options.setdefault("account_name", loc.account)
    return adlfs.AzureBlobFileSystem(skip_instance_cache=True, **options)


def _hdfs(loc: Location, options: dict[str, Any]) -> Any:
    # pyarrow loads libhdfs (JNI) and needs a Hadoop client's jars on the CLASSPATH.
    if not (os.environ.get("HADOOP_HOME") or os.environ.get("ARROW_LIBHDFS_DIR")):
        raise BackendMissing(
            loc.canonical,
            "no Hadoop client here: hdfs:// needs libhdfs, HADOOP_HOME and "
            "CLASSPATH=$(hadoop classpath --glob); or collect with --engine spark on the cluster",
        )
    pafs = _module("pyarrow.fs", loc.canonical, "all")
    from fsspec.implementations.arrow import ArrowFSWrapper

    try:
        hdfs = pafs.HadoopFileSystem(loc.host or "default", loc.port or 0, **options)
    except (OSError, RuntimeError) as exc:
        raise BackendMissing(
            loc.canonical,
            f"cannot start the Hadoop client ({str(exc).splitlines()[0][:120]}); check "
            "HADOOP_HOME, CLASSPATH=$(hadoop classpath --glob) and JAVA_HOME",
        ) from exc
    return ArrowFSWrapper(hdfs)


BACKENDS: dict[str, Callable[[Location, dict[str, Any]], Any]] = {
    "s3": _s3,
    "gs": _gs,
    "abfs": _abfs,
    "hdfs": _hdfs,
}
