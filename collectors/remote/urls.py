"""Checkpoint locations as URLs: which backend reads them, and their canonical, secret-free form.

Pure string work, no I/O. The canonical URL is what the database stores and what every message
shows: no ``user:password@``, no query string (SAS tokens live there), one spelling per place.

Example::

    loc = parse_location("s3a://AKIA:secret@bucket/cps/orders/?x=1")
    assert loc.canonical == "s3://bucket/cps/orders" and loc.key == "bucket/cps/orders"
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

# URL scheme -> backend (fsspec protocol, or "local" / "hdfs").
SCHEMES: dict[str, str] = {
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gs",
    "gcs": "gs",
    "abfs": "abfs",
    "abfss": "abfs",
    "az": "abfs",
    "hdfs": "hdfs",
    "file": "local",
}
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# Storage option keys whose values are secrets (matched anywhere in the key, any case).
_SECRET_KEY = re.compile(
    r"secret|password|passwd|token|credential|sas|signature|connection_string|"
    r"account_key|key_id|private|session",
    re.I,
)


@dataclass(frozen=True)
class Location:
    """Where a checkpoint lives. ``key`` is what the backend is given (``bucket/path``)."""

    backend: str
    canonical: str
    key: str
    # abfs: the storage account named in ``container@account.dfs.core.windows.net``.
    account: str | None = None
    # hdfs: the name node.
    host: str | None = None
    port: int | None = None

    @property
    def is_local(self) -> bool:
        return self.backend == "local"


def is_url(path: str) -> bool:
    """True for ``scheme://…``; plain paths (even with a colon in them) are not URLs."""
    return _URL.match(path) is not None


def parse_location(path: str) -> Location:
    """The :class:`Location` of a plain path or URL; ``ValueError`` for an unknown scheme."""
    if not is_url(path):
        local = os.path.abspath(os.path.expanduser(path))
        return Location("local", local, local)
    parts = urlsplit(path)
    scheme = parts.scheme.lower()
    backend = SCHEMES.get(scheme)
    if backend is None:
        known = ", ".join(f"{s}://" for s in sorted(SCHEMES))
        raise ValueError(f"unknown URL scheme {scheme}:// (known: {known})")
    host = parts.hostname or ""  # urlsplit drops user:password@ here
    rel = _clean(unquote(parts.path))
    if backend == "local":
        local = os.path.abspath("/" + rel)
        return Location("local", local, local)
    if backend == "hdfs":
        port = parts.port
        netloc = f"{host}:{port}" if port else host
        return Location("hdfs", _join(f"hdfs://{netloc}", rel), "/" + rel, host=host, port=port)
    if not host:
        raise ValueError(f"{scheme}:// needs a bucket or container: {scheme}://NAME/path")
    if backend == "abfs":
        # container@account.dfs.core.windows.net: the user part of the netloc is the container.
        user_host = parts.netloc.rsplit("@", 1)
        if len(user_host) == 2 and "." in host:
            container = user_host[0].split(":", 1)[0]
            account = host.split(".", 1)[0]
            base = f"abfss://{container}@{host}"
            return Location("abfs", _join(base, rel), _join(container, rel), account=account)
        return Location("abfs", _join(f"abfss://{host}", rel), _join(host, rel))
    return Location(backend, _join(f"{backend}://{host}", rel), _join(host, rel))


def child(url: str, name: str) -> str:
    """``url`` + ``/name``, for URLs and local paths alike."""
    return url.rstrip("/") + "/" + name if is_url(url) else os.path.join(url, name)


def redact(text: str, options: Mapping[str, object]) -> str:
    """``text`` with every secret-looking option value replaced by ``***``."""
    for value in secret_values(options):
        text = text.replace(value, "***")
    return text


def secret_values(options: Mapping[str, object]) -> list[str]:
    """String values of ``options`` (nested too) under secret-looking keys, longest first."""
    out: list[str] = []

    def walk(mapping: Mapping[str, object], secret: bool) -> None:
        for key, value in mapping.items():
            is_secret = secret or bool(_SECRET_KEY.search(str(key)))
            if isinstance(value, Mapping):
                walk(value, is_secret)
            elif is_secret and isinstance(value, str) and len(value) >= 4:
                out.append(value)

    walk(options, False)
    return sorted(set(out), key=len, reverse=True)


def _clean(path: str) -> str:
    return "/".join(p for p in path.split("/") if p and p != ".")


def _join(base: str, rel: str) -> str:
    return f"{base}/{rel}" if rel else base
