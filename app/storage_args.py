"""Where checkpoints live: the storage options every command that reads one accepts.

Example::

    stateglass state s3://bucket/cp --storage-option profile=prod --verbose
    stateglass collect abfss://cps@acct.dfs.core.windows.net/orders --config stateglass.toml

Values given here win over the ``[storage]`` table of ``--config``, which wins over defaults.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from stateglass.app.errors import AppError


def add_storage_args(p: argparse.ArgumentParser) -> None:
    """``--storage-option``, ``--cache-dir``, ``--cache-size``, ``--config`` and ``--verbose``."""
    from stateglass.collectors.remote.cache import DEFAULT_CACHE_DIR

    g = p.add_argument_group("remote storage (s3://, gs://, abfss://, hdfs://)")
    g.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend option (s3fs, adlfs, gcsfs), repeatable; a.b=v nests, JSON values parse "
        "(e.g. endpoint_url=http://minio:9000, anon=true)",
    )
    g.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help=f"cache of immutable state files read remotely (default {DEFAULT_CACHE_DIR})",
    )
    g.add_argument(
        "--cache-size",
        default=None,
        metavar="SIZE",
        help="cache limit, least recently used out first: 2GiB (default), 500MB, 0 = off",
    )
    opts = {a for action in p._actions for a in action.option_strings}
    if "--config" not in opts:
        g.add_argument(
            "--config",
            default=None,
            metavar="FILE",
            help="TOML config file; its [storage] table sets the options above (the dashboard "
            "also judges health with its rule sections, docs/health.md)",
        )
    if "--verbose" not in opts:
        g.add_argument(
            "--verbose",
            action="store_true",
            help="print the storage requests made (LIST/GET/HEAD) and cache hits on stderr",
        )


def apply_storage_args(args: argparse.Namespace) -> None:
    """Configure this process's storage settings from ``args`` (a no-op for other commands)."""
    if not hasattr(args, "storage_option"):
        return
    from stateglass.collectors.remote.settings import (
        StorageSettings,
        configure,
        from_config,
        merge,
        parse_options,
        parse_size,
    )

    table: dict[str, Any] = {}
    if args.config:
        table = from_config(_read_toml(args.config), os.path.abspath(args.config))
    base = StorageSettings()
    try:
        options = merge(base.options, table.get("options", {}))
        options = merge(options, parse_options(args.storage_option))
        size_text = args.cache_size if args.cache_size is not None else table.get("cache_size")
        cache_bytes = parse_size(size_text) if size_text is not None else base.cache_bytes
    except ValueError as exc:
        raise AppError(str(exc)) from exc
    cache_dir = (
        args.cache_dir or table.get("cache_dir") or base.cache_dir
    )  # base: $STATEGLASS_CACHE_DIR
    configure(StorageSettings(options, str(cache_dir), cache_bytes))


def print_counts(args: argparse.Namespace) -> None:
    """``--verbose``: the storage requests this command made, on stderr."""
    if getattr(args, "verbose", False) and hasattr(args, "storage_option"):
        from stateglass.collectors.remote import COUNTS

        print(f"stateglass: {COUNTS.line()}", file=sys.stderr)


def _read_toml(path: str) -> dict[str, Any]:
    import tomllib  # only with --config: every command pays for what it imports at start

    from stateglass.collectors.errors import BadConfig

    shown = os.path.abspath(os.path.expanduser(path))
    try:
        with open(shown, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise BadConfig(shown, "no such config file") from exc
    except OSError as exc:
        raise BadConfig(shown, f"cannot read ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BadConfig(shown, f"not valid TOML: {exc}") from exc
