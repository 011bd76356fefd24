"""The CLI's sub-commands: each takes parsed arguments and returns an exit status."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from stateglass.app.errors import AppError
from stateglass.app.memory import keep_freed_memory
from stateglass.app.output import open_sink
from stateglass.app.parallel import can_parallelize, default_jobs, write_state_parallel
from stateglass.collectors.checkpoint import INFERRED, INFERRED_HELP, Checkpoint, StoreInfo
from stateglass.collectors.fs import LOCAL
from stateglass.collectors.remote.urls import is_url
from stateglass.collectors.state import (
    StateRequest,
    StateSource,
    iter_raw_changes,
)
from stateglass.collectors.text import ranges
from stateglass.parsers.state_rows import LIST_STATE, MAP_STATE, TIMER_STATE


def store_summary(cp: Checkpoint, store: StoreInfo) -> dict[str, Any]:
    """What ``info`` says of one store; versions are those every partition can rebuild."""
    source = StateSource(cp, StateRequest(store.operator_id, store.store_name, state_var=""))
    per_partition = [set(source.reader(p).versions()) for p in source.partitions]
    common = sorted(set.intersection(*per_partition)) if per_partition else []
    return {
        "operator_id": store.operator_id,
        "operator_name": store.operator_name,
        "store_name": store.store_name,
        "provider": store.provider,
        "num_partitions": store.num_partitions,
        "versions": common,
        "batch_ids": [v - 1 for v in common],
        "key_schema": store.key_schema.simple_string() if store.key_schema else None,
        "value_schema": store.value_schema.simple_string() if store.value_schema else None,
        "column_families": [
            {
                "name": cf.name,
                "key_schema": cf.key_schema.simple_string(),
                "value_schema": cf.value_schema.simple_string(),
            }
            for cf in store.column_families
        ]
        if store.uses_column_families
        else [],
        "time_mode": store.time_mode,
        "state_variables": [_state_variable(store, var.name) for var in store.state_variables],
    }


def _state_variable(store: StoreInfo, name: str) -> dict[str, Any]:
    """A transformWithState state variable: its kind, how to read it, the columns it gives."""
    var = store.state_variable(name)
    assert var is not None
    out: dict[str, Any] = {
        "name": name,
        "kind": var.kind,
        "ttl_enabled": var.ttl_enabled,
        "option": "--read-timers" if var.kind == TIMER_STATE else f"--state-var {name}",
    }
    cf = store.column_family(name)
    if cf is None:
        return out
    key, value = cf.key_schema.simple_string(), cf.value_schema.simple_string()
    parts = {f.name: f.data_type.simple_string() for f in cf.key_schema.fields}
    group, user = parts.get("key", "?"), parts.get("userKey", "?")
    if var.kind == LIST_STATE:
        out["columns"] = {"key": key, "list_element": value}
        out["columns_no_flatten"] = {"key": key, "list_value": f"array<{value}>"}
    elif var.kind == MAP_STATE:
        out["columns"] = {"key": group, "user_map_key": user, "user_map_value": value}
        out["columns_no_flatten"] = {"key": group, "map_value": f"map<{user},{value}>"}
    elif var.kind == TIMER_STATE:
        out["columns"] = {"key": group, "expiration_timestamp_ms": "bigint"}
    else:
        out["columns"] = {"key": key, "value": value}
    return out


def info(args: argparse.Namespace) -> int:
    cp = Checkpoint.open(args.checkpoint)
    conf = cp.conf
    summary: dict[str, Any] = {
        "checkpoint": cp.root,
        "query_id": cp.query_id,
        "offset_batches": cp.offset_batch_ids,
        "committed_batches": cp.commit_batch_ids,
        "last_committed_batch": cp.last_committed_batch,
        "codec": conf.codec if conf else None,
        "shuffle_partitions": conf.shuffle_partitions if conf else None,
        "stores": [store_summary(cp, s) for s in cp.stores()],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    pending = sorted(set(cp.offset_batch_ids) - set(cp.commit_batch_ids))
    print(f"checkpoint   {cp.root}")
    print(f"query id     {cp.query_id or '(no metadata file)'}")
    offsets, commits = ranges(cp.offset_batch_ids), ranges(cp.commit_batch_ids)
    print(f"batches      offsets {offsets}; committed {commits}")
    if pending:
        print(f"pending      {ranges(pending)} (offsets written, not committed)")
    print(f"codec        {summary['codec']}; shuffle partitions {summary['shuffle_partitions']}")
    if not summary["stores"]:
        print("state        none (stateless query)")
    for s in summary["stores"]:
        print()
        print(f"operator {s['operator_id']} {s['operator_name']}  store {s['store_name']}")
        if str(s["operator_name"]).endswith(INFERRED):
            print(f"  name       {INFERRED_HELP}")
        print(f"  provider   {s['provider']}, {s['num_partitions']} partitions")
        print(f"  versions   {ranges(s['versions'])}  (batch ids {ranges(s['batch_ids'])})")
        if s["state_variables"]:
            print(f"  time mode  {s['time_mode'] or 'none'}")
            for var in s["state_variables"]:
                ttl = ", TTL" if var["ttl_enabled"] else ""
                print(f"  state var  {var['name']}  ({var['kind']}{ttl}; {var['option']})")
                for column, type_ in var.get("columns", {}).items():
                    print(f"    {column:<24} {type_}")
        elif s["column_families"]:
            for cf in s["column_families"]:
                print(f"  state var  {cf['name']}")
                print(f"    key      {cf['key_schema']}")
                print(f"    value    {cf['value_schema']}")
        else:
            print(f"  key        {s['key_schema']}")
            print(f"  value      {s['value_schema']}")
    return 0


def _refuse_output_inside(cp: Checkpoint, output: str | None) -> None:
    """StateGlass never writes inside a checkpoint, not even where ``-o`` points."""
    if output is None or is_url(cp.root):
        return  # -o is a local file: it cannot be inside a remote checkpoint
    root = os.path.realpath(cp.root)
    target = os.path.realpath(output)
    if os.path.commonpath([root, target]) == root:
        raise AppError(f"{output}: is inside the checkpoint {cp.root}; write the output elsewhere")


def _request(args: argparse.Namespace, batch_id: int | None = None) -> StateRequest:
    return StateRequest(
        operator_id=args.operator,
        store_name=args.store,
        batch_id=batch_id,
        partitions=args.partition,
        state_var=args.state_var,
        read_timers=args.read_timers,
        flatten=not getattr(args, "no_flatten", False),
    )


def state(args: argparse.Namespace) -> int:
    keep_freed_memory()
    cp = Checkpoint.open(args.checkpoint)
    _refuse_output_inside(cp, args.output)
    request = _request(args, args.batch_id)
    source = StateSource(cp, request)
    codec = source.row_codec
    version = cp.resolve_batch(args.batch_id) + 1
    jobs = args.jobs if args.jobs else default_jobs(len(source.partitions))
    if cp.fs is not LOCAL:
        jobs = 1  # forked workers cannot share a remote client's event loop and connections
    with open_sink(args.format, args.output, codec, args.time_zone) as sink:
        if can_parallelize(sink, source.partitions, jobs):
            write_state_parallel(source, sink, version, jobs)  # type: ignore[arg-type]
            return 0
        for partition in source.partitions:
            with source.decoding(partition):
                sink.write_state_partition(source, partition, version)
    return 0


def changes(args: argparse.Namespace) -> int:
    if args.read_timers:
        # Spark 4.3's reader fails on it too (a ClassCastException in its change feed).
        raise AppError("no change feed for registered timers: read them with state --read-timers")
    cp = Checkpoint.open(args.checkpoint)
    _refuse_output_inside(cp, args.output)
    request = _request(args)
    source = StateSource(cp, request)
    with open_sink(args.format, args.output, source.row_codec, args.time_zone) as sink:
        for batch, kind, partition, key, value in iter_raw_changes(
            source, args.from_batch, args.to_batch
        ):
            with source.decoding(partition):
                sink.write_change(batch, kind, partition, key, value)
    return 0


def _collect_for_dashboard(
    paths: list[str], db_path: str, args: argparse.Namespace | None = None
) -> list[str]:
    """Collect every checkpoint at ``paths`` into ``db_path``, one progress line each
    (folders searched with the discovery bounds in ``args``)."""
    from stateglass.app import discovery
    from stateglass.app.collect_cmd import ProgressBar
    from stateglass.app.watchers import refuse_db_inside
    from stateglass.collectors.db import Database
    from stateglass.collectors.engines import LocalEngine
    from stateglass.collectors.scan import Scanner

    # Resolve every path first: a typo fails before anything is written.
    roots = sorted(discovery.find(paths, args or argparse.Namespace()))
    refuse_db_inside(db_path, roots)
    # The start-up collect is a full one, before any thread starts: one worker per core.
    # The watcher's re-scans stay in-process (app/collect_cmd.py, add_jobs_arg).
    scanner = Scanner(Database(db_path), LocalEngine(jobs=0))
    for n, root in enumerate(roots, 1):
        label = f"[{n}/{len(roots)}] {root}"
        print(f"collecting {label}", file=sys.stderr, flush=True)
        summary = scanner.scan(root, ProgressBar(label))
        print(
            f"  {summary.versions} state versions, {summary.batches} batches, "
            f"{summary.problems} problems",
            file=sys.stderr,
            flush=True,
        )
    return roots


def _watch_options(args: argparse.Namespace, progress: Sequence[str] = ()) -> list[str]:
    """The dashboard's ``watch`` flags, for its watcher child (which polls ``progress`` too)."""
    out = ["--debounce", str(args.debounce), "--poll-interval", str(args.poll_interval)]
    out += [f"--progress={p}" for p in progress]
    return out + ["--poll"] * args.poll + ["--verbose"] * args.verbose


def _health_config_env(args: argparse.Namespace) -> dict[str, str]:
    """The health rules' ``--config`` file for the server (checked here, before anything runs).

    The Overview cards and the Health page judge with its thresholds, e.g. ``make run`` turns
    the stalled-query rule off for the finished sample runs (``sample_checkpoints/demo.toml``).
    """
    from stateglass.app.dashboard.context import HEALTH_CONFIG_ENV
    from stateglass.collectors.health import load_config

    path = getattr(args, "config", None)
    if not path:
        return {}
    load_config(path)  # a bad file is one line and exit status 2, before the server starts
    return {HEALTH_CONFIG_ENV: os.path.abspath(os.path.expanduser(path))}


def dashboard(args: argparse.Namespace) -> int:
    """Collect the paths into the database, watch them, and serve the dashboard on it.

    Example: ``stateglass dashboard /data/checkpoints --db ./sg.duckdb --port 8502``.
    """
    from stateglass.app import allowed
    from stateglass.app.dashboard.server import (
        check_port_free,
        local_url,
        start_server,
        stop_server,
    )
    from stateglass.app.watchers import CONTROL_ENV, WATCHED_ENV, WatcherRegistry

    db_path = os.path.abspath(os.path.expanduser(args.db))
    from stateglass.collectors.progress import check_location

    # Every --progress path is checked before anything is written.
    progress = [check_location(p) for p in args.progress]
    health_config = _health_config_env(args)
    # A busy port fails before anything is collected (start_server checks again).
    check_port_free(args.host, args.port)
    roots = _collect_for_dashboard(args.paths, db_path, args) if args.paths else []
    if progress:
        from stateglass.app.collect_cmd import collect_progress
        from stateglass.collectors.db import Database

        collect_progress(Database(db_path), progress)
    # Open a browser only where there is a screen to show it on.
    headless = args.headless or not (os.environ.get("DISPLAY") or sys.platform == "darwin")
    # Our watcher writes the database while the server only reads it; it stops with us.
    # One watcher child for the paths given here and every one a visitor adds: the server
    # hands it new paths through its control file instead of starting processes of its own.
    watchers = WatcherRegistry(db_path, options=_watch_options(args, progress))
    watchers.start(roots)
    control = watchers.ensure() or ""
    env = dict(
        os.environ,
        **{
            WATCHED_ENV: os.pathsep.join(roots),
            CONTROL_ENV: control,
            # The Watch box accepts paths under these only.
            allowed.ALLOWED_ENV: allowed.encode([*getattr(args, "paths", []), *args.allow_path]),
            **health_config,
        },
    )
    # SIGTERM would end us without the cleanup below, leaving the server running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    server = None
    try:
        server = start_server(db_path, args.port, args.host, headless, env)
        print(
            f"StateGlass dashboard on {local_url(args.host, args.port)} over {db_path}; "
            f"watching {len(roots)} checkpoint(s) (Ctrl+C to stop)",
            file=sys.stderr,
            flush=True,
        )
        return server.wait()
    finally:
        if server is not None:
            stop_server(server)
        watchers.stop_all()
