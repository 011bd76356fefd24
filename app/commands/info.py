"""``stateglass info``: what a checkpoint holds, as text or JSON.

Example::

    stateglass info /data/checkpoints/orders --json
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from stateglass.app.args import CHECKPOINT_HELP

if TYPE_CHECKING:
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo


def add_parser(subparsers: Any) -> None:
    """Register ``info`` on the CLI's subparsers."""
    p = subparsers.add_parser("info", help="query id, batches, operators, stores and schemas")
    p.add_argument("checkpoint", help=CHECKPOINT_HELP)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def store_summary(cp: Checkpoint, store: StoreInfo) -> dict[str, Any]:
    """What ``info`` says of one store; versions are those every partition can rebuild."""
    from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource

    source = StateSource(cp, StateRequest(store.operator_id, store.store_name, state_var=""))
    common = source.readable_versions()
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
        **_rows(cp, store, source),
    }


def _rows(cp: Checkpoint, store: StoreInfo, source: Any) -> dict[str, Any]:
    """A transformWithState store's rows per column family at the last committed batch: the
    rows ``state --state-var`` / ``--read-timers`` return, and the raw RocksDB keys."""
    from stateglass.collectors.checkpoints.variable_rows import store_rows

    batch = cp.last_committed_batch
    if not (store.is_transform_with_state and store.state_variables) or batch is None:
        return {}
    return {
        "rows_at_batch": batch,
        "rows": [
            {"name": c.name, "role": c.role, "kind": c.kind, "rows": c.rows, "raw_keys": c.raw_keys}
            for c in store_rows(source, batch)
        ],
    }


def _state_variable(store: StoreInfo, name: str) -> dict[str, Any]:
    """A transformWithState state variable: its kind, how to read it, the columns it gives."""
    from stateglass.parsers.state_rows import LIST_STATE, MAP_STATE, TIMER_STATE

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


def run(args: argparse.Namespace) -> int:
    """``stateglass info``: the checkpoint's batches, operators, stores and schemas."""
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

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
        "repartitions": [
            {
                "batch_id": r.batch_id,
                "before": r.partitions_before,
                "after": r.partitions_after,
                "committed": r.batch_id in cp.commit_batch_ids,
            }
            for r in cp.repartitions
        ],
        "stores": [store_summary(cp, s) for s in cp.stores()],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_text(cp, summary)
    return 0


def _print_text(cp: Checkpoint, summary: dict[str, Any]) -> None:
    from stateglass.collectors.text import ranges

    pending = sorted(set(cp.offset_batch_ids) - set(cp.commit_batch_ids))
    print(f"checkpoint   {cp.root}")
    print(f"query id     {cp.query_id or '(no metadata file)'}")
    offsets, commits = ranges(cp.offset_batch_ids), ranges(cp.commit_batch_ids)
    print(f"batches      offsets {offsets}; committed {commits}")
    if pending:
        print(f"pending      {ranges(pending)} (offsets written, not committed)")
    print(f"codec        {summary['codec']}; shuffle partitions {summary['shuffle_partitions']}")
    for r in summary["repartitions"]:
        what = "repartition" if r["committed"] else "repartition, not committed"
        print(f"partitions   {r['before']} → {r['after']} at batch {r['batch_id']} ({what})")
    if not summary["stores"]:
        print("state        none (stateless query)")
    for s in summary["stores"]:
        _print_store(s)


def _print_store(s: dict[str, Any]) -> None:
    from stateglass.collectors.checkpoints.checkpoint import INFERRED, INFERRED_HELP
    from stateglass.collectors.text import ranges

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
        _print_rows(s)
    elif s["column_families"]:
        for cf in s["column_families"]:
            print(f"  state var  {cf['name']}")
            print(f"    key      {cf['key_schema']}")
            print(f"    value    {cf['value_schema']}")
    else:
        print(f"  key        {s['key_schema']}")
        print(f"  value      {s['value_schema']}")


def _print_rows(s: dict[str, Any]) -> None:
    """Rows per state variable at the last committed batch, then the raw RocksDB keys."""
    if "rows" not in s:
        return
    print(f"  rows       at batch {s['rows_at_batch']}, as Spark's reader returns them:")
    for c in s["rows"]:
        if c["rows"] is not None:
            what = "timers" if c["role"] == "timers" else c["role"]
            print(f"    {c['name']:<32} {c['rows']:>10,}  ({what})")
    raw = ", ".join(f"{c['name']} {c['raw_keys']:,}" for c in s["rows"])
    print(f"  raw keys   {sum(c['raw_keys'] for c in s['rows']):,} RocksDB keys ({raw})")
