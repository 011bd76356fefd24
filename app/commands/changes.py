"""``stateglass changes``: the change feed of one store between two batches.

Example::

    stateglass changes /data/checkpoints/orders --from 30 --to 41
"""

from __future__ import annotations

import argparse
from typing import Any

from stateglass.app.args import add_store_args, store_request
from stateglass.app.errors import AppError
from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint


def add_parser(subparsers: Any) -> None:
    """Register ``changes`` on the CLI's subparsers."""
    p = subparsers.add_parser("changes", help="change feed between two batches")
    add_store_args(p)
    p.add_argument(
        "--from",
        dest="from_batch",
        type=int,
        required=True,
        metavar="B1",
        help="first batch whose changes to print (required)",
    )
    p.add_argument(
        "--to",
        dest="to_batch",
        type=int,
        default=None,
        metavar="B2",
        help="last batch whose changes to print (default: last committed)",
    )


def run(args: argparse.Namespace) -> int:
    """``stateglass changes``: one row per put or delete, batch by batch."""
    from stateglass.app.output import open_sink
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.checkpoints.state_reader import StateSource, iter_raw_changes

    if args.read_timers:
        # Spark 4.3's reader fails on it too (a ClassCastException in its change feed).
        raise AppError("no change feed for registered timers: read them with state --read-timers")
    cp = Checkpoint.open(args.checkpoint)
    if args.output is not None:
        refuse_inside_checkpoint(args.output, "-o", [cp.root])
    source = StateSource(cp, store_request(args))
    with open_sink(args.format, args.output, source.row_codec, args.time_zone) as sink:
        for batch, kind, partition, key, value in iter_raw_changes(
            source, args.from_batch, args.to_batch
        ):
            with source.decoding(partition):
                sink.write_change(batch, kind, partition, key, value)
    return 0
