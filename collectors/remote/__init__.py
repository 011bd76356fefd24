"""Checkpoints where they live: one entry point from a path or URL to a :class:`FileSystem`.

Plain paths and ``file://`` get the fast local implementation; ``s3://`` (``s3a``, ``s3n``),
``gs://``, ``abfs(s)://`` and ``hdfs://`` get :class:`~collectors.remote.objectfs.ObjectFileSystem`
over the fsspec backend of the scheme. Credentials come from each cloud's standard chain
(environment, profiles, instance or managed identity); ``--storage-option`` adds the rest.

Example::

    fs, root = open_location("s3://bucket/checkpoints/orders", {"profile": "prod"})
    cp = Checkpoint(root, fs)
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

from stateglass.collectors.errors import BackendMissing, NotACheckpoint, StorageError
from stateglass.collectors.fs import LOCAL, FileSystem
from stateglass.collectors.remote.backends import BACKENDS
from stateglass.collectors.remote.cache import FileCache
from stateglass.collectors.remote.failures import storage_error
from stateglass.collectors.remote.objectfs import COUNTS, ObjectFileSystem, RequestCounts
from stateglass.collectors.remote.settings import StorageSettings, configure, current, merge
from stateglass.collectors.remote.urls import Location, child, is_url, parse_location, redact

# One client per backend and options: creating one costs a credentials lookup.
_CLIENTS: dict[str, Any] = {}
_CACHES: dict[tuple[str, int], FileCache] = {}
_ENV_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_", "GCS", "HADOOP_")


def canonical(path: str) -> str:
    """The secret-free spelling of ``path`` that the database stores."""
    try:
        return parse_location(path).canonical
    except ValueError as exc:
        raise NotACheckpoint(_scheme_only(path), str(exc)) from exc


def open_location(path: str, options: Mapping[str, Any] | None = None) -> tuple[FileSystem, str]:
    """The file system that reads ``path`` and its canonical URL (or absolute local path)."""
    try:
        loc = parse_location(path)
    except ValueError as exc:
        raise NotACheckpoint(_scheme_only(path), str(exc)) from exc
    if loc.is_local:
        return LOCAL, loc.canonical
    settings = current()
    opts = merge(settings.options, options or {})
    client = _client(loc, opts)
    return ObjectFileSystem(client, loc, _cache(settings), opts), loc.canonical


def object_client(path: str) -> tuple[Any, Location, dict[str, Any]]:
    """The fsspec client of a remote ``path``, its location and the options it was built with
    (secrets to redact): for the one writer of new checkpoints on object stores
    (``collectors/rewrite/object_store.py``); everything else reads through ``open_location``."""
    try:
        loc = parse_location(path)
    except ValueError as exc:
        raise NotACheckpoint(_scheme_only(path), str(exc)) from exc
    opts = merge(current().options, {})
    return _client(loc, opts), loc, opts


def fs_for(path: str) -> FileSystem:
    """The file system that reads ``path``: what discovery and the watcher take."""
    return open_location(path)[0]


def _client(loc: Location, opts: dict[str, Any]) -> Any:
    import json

    # The environment picks endpoints and profiles: a changed one needs a new client.
    env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}
    ident = json.dumps([loc.backend, loc.account, loc.host, loc.port, opts, env], sort_keys=True)
    if ident not in _CLIENTS:
        try:
            _CLIENTS[ident] = BACKENDS[loc.backend](loc, copy.deepcopy(opts))
        except StorageError:
            raise
        except Exception as exc:
            # Bad option names or values, a credentials chain that fails at construction.
            wrapped = storage_error(loc.canonical, exc, opts)
            if wrapped is not None:
                raise wrapped from exc
            why = redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, opts)
            raise BackendMissing(loc.canonical, f"cannot set up the client: {why}") from exc
    return _CLIENTS[ident]


def _cache(settings: StorageSettings) -> FileCache | None:
    if settings.cache_bytes <= 0:
        return None
    key = (settings.cache_dir, settings.cache_bytes)
    if key not in _CACHES:
        _CACHES[key] = FileCache(settings.cache_dir, settings.cache_bytes)
    return _CACHES[key]


def _scheme_only(path: str) -> str:
    """What an error may show of a path it could not parse: never a user:password@ part."""
    return path.split("://", 1)[0] + "://…" if "://" in path else path


__all__ = [
    "COUNTS",
    "Location",
    "RequestCounts",
    "StorageSettings",
    "canonical",
    "child",
    "configure",
    "current",
    "fs_for",
    "is_url",
    "object_client",
    "open_location",
    "parse_location",
]
