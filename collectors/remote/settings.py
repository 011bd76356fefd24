"""Storage settings of this process: options for the backends, and the local cache.

The CLI configures them once from ``--storage-option``, ``--cache-dir``, ``--cache-size`` and
the ``[storage]`` table of the config file. They travel to child processes (the dashboard's
watcher and server) in one environment variable, so secrets never appear on a command line.

Example config::

    [storage]
    cache_dir = "/var/cache/stateglass"
    cache_size = "4GiB"

    [storage.options]               # passed to every remote backend (s3fs, adlfs, gcsfs)
    profile = "analytics"
    client_kwargs = { region_name = "eu-west-1" }
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stateglass.collectors.config_file import Section, Tables, refuse_unknown_keys
from stateglass.collectors.errors import BadConfig
from stateglass.collectors.remote.cache import DEFAULT_CACHE_BYTES, default_cache_dir

ENV = "STATEGLASS_STORAGE"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B)?\s*$", re.I)


@dataclass(frozen=True)
class StorageSettings:
    options: dict[str, Any] = field(default_factory=dict)
    cache_dir: str = field(default_factory=default_cache_dir)
    cache_bytes: int = DEFAULT_CACHE_BYTES

    def to_json(self) -> str:
        return json.dumps(
            {"options": self.options, "cache_dir": self.cache_dir, "cache_bytes": self.cache_bytes}
        )

    @classmethod
    def from_json(cls, text: str) -> StorageSettings:
        doc = json.loads(text)
        return cls(dict(doc["options"]), str(doc["cache_dir"]), int(doc["cache_bytes"]))


_current: StorageSettings | None = None


def configure(settings: StorageSettings) -> None:
    """Use ``settings`` in this process and in the processes it starts."""
    global _current
    _current = settings
    os.environ[ENV] = settings.to_json()


def current() -> StorageSettings:
    global _current
    if _current is None:
        text = os.environ.get(ENV)
        _current = StorageSettings.from_json(text) if text else StorageSettings()
    return _current


def parse_size(text: str | int) -> int:
    """``2GiB``, ``500M``, ``0`` (no cache) or a plain byte count; ``ValueError`` otherwise."""
    if isinstance(text, int):
        if text < 0:
            raise ValueError("a size cannot be negative")
        return text
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a size like 2GiB, 500MB or 0")
    scale = 1024 ** "_KMGT".index(m.group(2).upper() or "_")
    return int(float(m.group(1)) * scale)


def parse_options(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as backend options; ``a.b=v`` nests, JSON values (true, 3, {…}) parse.

    Raises ``ValueError`` naming the key (never the value, which may be a secret).
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--storage-option {key or pair[:20]!r}: expected KEY=VALUE")
        try:
            value: Any = json.loads(raw)
            if not isinstance(value, bool | int | float | dict | list) or value is None:
                value = raw
        except ValueError:
            value = raw
        target = out
        *parents, leaf = key.split(".")
        for p in parents:
            nxt = target.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise ValueError(f"--storage-option {key!r}: {p!r} is set twice")
            target = nxt
        target[leaf] = value
    return out


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, nested mappings merged key by key."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class StorageConfig:
    """The ``[storage]`` table of a ``--config`` file: what the command line may override."""

    options: dict[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    cache_bytes: int | None = None


_KEYS = ("cache_dir", "cache_size", "options")


def from_config(data: Tables, path: str) -> StorageConfig:
    """The ``[storage]`` table of a config file, checked; ``BadConfig`` names ``path``."""
    table = data.get("storage", {})
    refuse_unknown_keys(path, "storage", table, _KEYS)
    options = table.get("options", {})
    if not isinstance(options, dict):
        raise BadConfig(path, "[storage] options must be a table ([storage.options])")
    cache_bytes = None
    if "cache_size" in table:
        try:
            cache_bytes = parse_size(table["cache_size"])
        except (ValueError, TypeError) as exc:
            raise BadConfig(path, f"[storage] cache_size: {exc}") from exc
    cache_dir = table.get("cache_dir")
    return StorageConfig(dict(options), str(cache_dir) if cache_dir else None, cache_bytes)


# The ``[storage]`` section of a ``--config`` file (collectors/config_file.py).
SECTION = Section(("storage",), from_config)
