"""``stateglass report``: one checkpoint as a self-contained HTML page, Markdown, or PDF.

Examples::

    stateglass report /data/checkpoints/orders -o orders.html      # charts, works offline
    stateglass report /data/checkpoints/orders -o orders.md        # summary for a ticket
    stateglass report /data/checkpoints/orders -o orders.pdf       # needs Chromium
    stateglass report /data/checkpoints/orders --db ./sg.duckdb --no-collect -o r.html

The checkpoint is collected into the database first (incremental, as ``stateglass collect``);
the format follows the suffix of ``-o``. Neither the output nor the database may be inside
the checkpoint.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from stateglass.app.args import add_db_arg
from stateglass.parsers.units import fmt_bytes


def add_parser(subparsers: Any) -> None:
    """Register ``report`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "report", help="write a report of one checkpoint: .html (charts), .md or .pdf"
    )
    p.add_argument("checkpoint", help="checkpoint directory (the query's checkpointLocation)")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="FILE.html (self-contained, charts), FILE.md (summary) or FILE.pdf (via Chromium)",
    )
    add_db_arg(p)
    p.add_argument(
        "--no-collect",
        dest="collect",
        action="store_false",
        help="report what the database holds, without collecting the checkpoint first",
    )


def run(args: argparse.Namespace) -> int:
    """``stateglass report``: collect (incrementally), then write the report ``-o`` names."""
    from stateglass.app.collecting import scan_all, scanner_for
    from stateglass.app.report import writer_for
    from stateglass.app.report.model import load_report
    from stateglass.app.settings import settings_of
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint
    from stateglass.collectors.remote import canonical

    # Check everything cheap before collecting: a typo fails fast, and nothing is written.
    write = writer_for(args.output)
    cp = (
        Checkpoint.open(args.checkpoint) if args.collect else Checkpoint(canonical(args.checkpoint))
    )
    refuse_inside_checkpoint(args.output, "-o", [cp.root])
    db_path = os.path.abspath(os.path.expanduser(args.db))
    if args.collect:
        # scanner_for refuses a database inside the checkpoint before it writes anything.
        scanner, roots = scanner_for(
            argparse.Namespace(
                checkpoints=[cp.root],
                db=db_path,
                engine="local",
                master=None,
                settings=settings_of(args),
            )
        )
        scan_all(scanner, roots)
    data = load_report(db_path, cp.root)
    write(data, args.output)
    size = os.path.getsize(args.output)
    print(
        f"wrote {args.output} ({fmt_bytes(size)}): health {data.verdict}, "
        f"{len(data.stores)} store(s), {len(data.batches)} batches",
        file=sys.stderr,
    )
    return 0
