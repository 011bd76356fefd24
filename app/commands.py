"""The CLI's sub-commands: each takes parsed arguments and returns an exit status."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from app.errors import AppError
from app.output import open_sink
from collectors.checkpoint import Checkpoint, StoreInfo
from collectors.state import StateRequest, StateSource, iter_raw_changes, iter_raw_state


def _ranges(values: list[int]) -> str:
    """``[1,2,3,5]`` -> ``1..3, 5``."""
    if not values:
        return "none"
    out: list[str] = []
    start = prev = values[0]
    for v in values[1:]:
        if v == prev + 1:
            prev = v
            continue
        out.append(f"{start}..{prev}" if prev != start else str(start))
        start = prev = v
    out.append(f"{start}..{prev}" if prev != start else str(start))
    return ", ".join(out)


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
    }


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
    print(f"batches      offsets {_ranges(cp.offset_batch_ids)}; committed {_ranges(cp.commit_batch_ids)}")
    if pending:
        print(f"pending      {_ranges(pending)} (offsets written, not committed)")
    print(f"codec        {summary['codec']}; shuffle partitions {summary['shuffle_partitions']}")
    if not summary["stores"]:
        print("state        none (stateless query)")
    for s in summary["stores"]:
        print()
        print(f"operator {s['operator_id']} ({s['operator_name']})  store {s['store_name']}")
        print(f"  provider   {s['provider']}, {s['num_partitions']} partitions")
        print(f"  versions   {_ranges(s['versions'])}  (batch ids {_ranges(s['batch_ids'])})")
        if s["column_families"]:
            for cf in s["column_families"]:
                print(f"  state var  {cf['name']}")
                print(f"    key      {cf['key_schema']}")
                print(f"    value    {cf['value_schema']}")
        else:
            print(f"  key        {s['key_schema']}")
            print(f"  value      {s['value_schema']}")
    return 0


def _request(args: argparse.Namespace, batch_id: int | None = None) -> StateRequest:
    return StateRequest(
        operator_id=args.operator,
        store_name=args.store,
        batch_id=batch_id,
        partitions=args.partition,
        state_var=args.state_var,
    )


def state(args: argparse.Namespace) -> int:
    cp = Checkpoint.open(args.checkpoint)
    request = _request(args, args.batch_id)
    source = StateSource(cp, request)
    with open_sink(args.format, args.output, source.row_codec, args.time_zone) as sink:
        for partition, key, value in iter_raw_state(source, args.batch_id):
            with source.decoding(partition):
                sink.write_state(partition, key, value)
    return 0


def changes(args: argparse.Namespace) -> int:
    cp = Checkpoint.open(args.checkpoint)
    request = _request(args)
    source = StateSource(cp, request)
    with open_sink(args.format, args.output, source.row_codec, args.time_zone) as sink:
        for batch, kind, partition, key, value in iter_raw_changes(
            source, args.from_batch, args.to_batch
        ):
            with source.decoding(partition):
                sink.write_change(batch, kind, partition, key, value)
    return 0


def dashboard(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.path):
        raise AppError(f"{args.path}: no such directory")
    script = os.path.join(os.path.dirname(__file__), "dashboard.py")
    cmd = [
        sys.executable, "-m", "streamlit", "run", script,
        "--server.port", str(args.port),
        "--server.headless", "true" if args.headless else "false",
        "--browser.gatherUsageStats", "false",
        "--", os.path.abspath(args.path),
    ]
    return subprocess.call(cmd)
