"""``stateglass state``: the state of one store at a batch, as Spark's state reader gives it.

Examples::

    stateglass state /data/checkpoints/orders --batch-id 41 --format jsonl -o state.jsonl
    stateglass state /data/checkpoints/sessions --state-var counts     # transformWithState
    stateglass state /data/checkpoints/sessions --read-timers
"""

from __future__ import annotations

import argparse
from typing import Any

from stateglass.app.args import add_store_args, store_request
from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint


def add_parser(subparsers: Any) -> None:
    """Register ``state`` on the CLI's subparsers."""
    p = subparsers.add_parser("state", help="the state of one store at a batch")
    add_store_args(p)
    p.add_argument(
        "--batch-id",
        type=int,
        default=None,
        metavar="B",
        help="read the state committed by batch B (state version B+1); default: last committed",
    )
    p.add_argument(
        "--no-flatten",
        action="store_true",
        help="transformWithState: one row per key with the whole list (list_value) or map "
        "(map_value), as Spark's flattenCollectionTypes=false",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="partitions read in parallel (default: one per CPU core; 1 = no worker processes)",
    )


def run(args: argparse.Namespace) -> int:
    """``stateglass state``: every row of the store at the batch, partition by partition."""
    from stateglass.app.memory import keep_freed_memory
    from stateglass.app.output import open_sink
    from stateglass.app.parallel import can_parallelize, default_jobs, write_state_parallel
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.checkpoints.state_reader import StateSource
    from stateglass.collectors.fs import LOCAL

    keep_freed_memory()
    cp = Checkpoint.open(args.checkpoint)
    if args.output is not None:
        refuse_inside_checkpoint(args.output, "-o", [cp.root])
    source = StateSource(cp, store_request(args, args.batch_id))
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
