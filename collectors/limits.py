"""The decompression limits in force (``docs/limits.md``): defaults, the environment, a config.

Every reader of a compressed file (state files, changelogs, RocksDB zips) takes its
:class:`~parsers.limits.DecodeLimits` from :func:`active` unless given some. The values come,
lowest priority first, from the documented defaults, the environment variables in :data:`ENV`
(any command), and the ``[limits]`` section of a ``--config`` file (``stateglass check``).

Example::

    STATEGLASS_MAX_RATIO=200 STATEGLASS_MAX_FILE_BYTES=8GiB stateglass state /cp --batch-id 9
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping

from stateglass.collectors.errors import BadConfig
from stateglass.parsers.limits import DecodeLimits

# field of DecodeLimits -> environment variable
ENV: dict[str, str] = {
    "max_ratio": "STATEGLASS_MAX_RATIO",
    "min_bytes": "STATEGLASS_MIN_BYTES",
    "max_file_bytes": "STATEGLASS_MAX_FILE_BYTES",
}
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.I)

_configured: DecodeLimits | None = None


def parse_size(text: str) -> int | None:
    """``"2GiB"``, ``"512m"``, ``"1048576"`` as bytes; None when it is not a size."""
    m = _SIZE.match(text)
    return int(m.group(1)) * _UNITS[m.group(2).lower()] if m else None


def from_env(environ: Mapping[str, str] | None = None) -> DecodeLimits:
    """The defaults, overridden by the environment; a bad value is a :class:`BadConfig`."""
    environ = os.environ if environ is None else environ
    changes: dict[str, int] = {}
    for name, var in ENV.items():
        raw = environ.get(var)
        if raw is None or not raw.strip():
            continue
        value = parse_size(raw)
        if value is None:
            raise BadConfig(
                var, f"must be a whole number (sizes may end in KiB, MiB, GiB), got {raw!r}"
            )
        changes[name] = value
    return dataclasses.replace(DecodeLimits(), **changes)


def configure(limits: DecodeLimits | None) -> None:
    """Make ``limits`` the ones in force in this process (None: back to the environment)."""
    global _configured
    _configured = limits


def active() -> DecodeLimits:
    """The limits in force: what :func:`configure` set, else defaults plus environment."""
    return _configured if _configured is not None else from_env()


__all__ = ["ENV", "active", "configure", "from_env", "parse_size"]
