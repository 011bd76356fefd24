"""``stateglass plan-partitions``: what N partitions would hold, before Spark repartitions.

Examples::

    stateglass plan-partitions /data/checkpoints/orders --partitions 16
    stateglass plan-partitions /data/checkpoints/orders --partitions 4 --batch-id 41 --format json

After the plan come the ways to carry it out: Spark 4.2+'s repartition (in place, RocksDB
only) and ``stateglass rewrite`` (a new checkpoint, either provider), each with its command or
the reason it does not apply.

Exit status: 0 with a plan Spark would carry out, 1 when Spark would refuse it (an HDFS-provider
checkpoint, an operator or store it cannot repartition, an unfinished last batch: the reasons
are printed, Spark's own; ``stateglass rewrite`` may still apply), 2 for bad input (not a
checkpoint, N < 1, N equal to the current count).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from stateglass.app.args import CHECKPOINT_HELP

if TYPE_CHECKING:
    from stateglass.app.analysis.repartition.plan import Plan
    from stateglass.app.analysis.rewrite_refusals import RepartitionWay

EXIT_REFUSED = 1


def add_parser(subparsers: Any) -> None:
    """Register ``plan-partitions`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "plan-partitions",
        help="predict keys, bytes, skew, restart cost and rewrite time for N partitions",
    )
    p.add_argument("checkpoint", help=CHECKPOINT_HELP)
    p.add_argument(
        "--partitions",
        type=int,
        required=True,
        metavar="N",
        help="the partition count to plan for (spark.sql.shuffle.partitions after repartition)",
    )
    p.add_argument(
        "--batch-id",
        type=int,
        default=None,
        metavar="B",
        help="plan from the state of batch B (default: the last committed, which Spark's "
        "repartition reads)",
    )
    p.add_argument("--operator", type=int, default=None, metavar="ID", help="only this operator")
    p.add_argument("--store", default=None, metavar="NAME", help="only this store")
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default) or json: one object with every partition of every store",
    )


def run(args: argparse.Namespace) -> int:
    """``stateglass plan-partitions``: the plan, then Spark's refusals if any."""
    from stateglass.app.analysis.repartition.plan import plan_partitions
    from stateglass.app.analysis.rewrite_refusals import repartition_ways
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

    cp = Checkpoint.open(args.checkpoint)
    plan = plan_partitions(cp, args.partitions, args.batch_id, args.operator, args.store)
    spark_refusal = "; ".join(why for _, why in plan.refusals) or None
    ways = repartition_ways(cp, args.partitions, spark_refusal)
    if args.format == "json":
        json.dump(plan_json(plan, ways), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(plan_text(plan, ways))
    return EXIT_REFUSED if plan.refusals else 0


def plan_json(plan: Plan, ways: Sequence[RepartitionWay] = ()) -> dict[str, Any]:
    """The plan as one JSON object (``--format json``), with the ways to carry it out."""
    from stateglass.app.analysis.repartition.plan import REWRITE_MODEL

    slow = plan.slowest_restart
    return {
        "checkpoint": plan.checkpoint,
        "batch_id": plan.batch_id,
        "current_partitions": plan.current_partitions,
        "partitions": plan.partitions,
        "keys": list(plan.keys),
        "bytes": list(plan.bytes),
        "stores": [
            {
                "operator_id": s.operator_id,
                "operator_name": s.operator_name,
                "store": s.label,
                "partition_key": s.rule,
                "keys": list(s.keys),
                "bytes": list(s.bytes),
                "skew": s.skew,
                "current_keys": list(s.current_keys),
                "current_bytes": list(s.current_bytes),
                "current_skew": s.current_skew,
                "unhashed_keys": s.unhashed,
                "warning": s.warning,
            }
            for s in plan.stores
        ],
        "slowest_restart": None
        if slow is None
        else {"partition": slow.partition, "bytes": slow.bytes, "files": slow.files},
        "disk_bytes_per_stored_byte": plan.disk_per_stored_byte,
        "rewrite_seconds": round(plan.rewrite_seconds, 1),
        "rewrite_estimate": {
            "overhead_s": REWRITE_MODEL.overhead_s,
            "bytes_per_s": REWRITE_MODEL.bytes_per_s,
            "basis": REWRITE_MODEL.basis,
        },
        "refusals": [{"store": where, "reason": why} for where, why in plan.refusals],
        "ways": [{"tool": w.tool, "command": w.command, "refusal": w.refusal} for w in ways],
    }


def plan_text(plan: Plan, ways: Sequence[RepartitionWay] = ()) -> str:
    """The plan as a few lines and one table per store, then the ways to carry it out."""
    from stateglass.app.analysis.repartition.plan import REWRITE_MODEL
    from stateglass.parsers.units import fmt_bytes

    lines = [
        f"checkpoint {plan.checkpoint}",
        f"state of batch {plan.batch_id}: {plan.current_partitions} → {plan.partitions} "
        "partitions (keys sent where Spark's repartition sends them)",
        "",
    ]
    for s in plan.stores:
        lines.append(
            f"operator {s.operator_id} ({s.operator_name}) store {s.label}: hashes the "
            f"{s.rule}; skew {_ratio(s.current_skew)} now → {_ratio(s.skew)}"
        )
        lines.append(f"  {'partition':>9}  {'keys':>12}  {'bytes':>12}")
        for p, (k, b) in enumerate(zip(s.keys, s.bytes, strict=True)):
            lines.append(f"  {p:>9}  {k:>12,}  {b:>12,}")
        if s.unhashed:
            lines.append(f"  {s.unhashed:,} keys of a type the planner cannot hash are left out")
        if s.warning:
            lines.append(f"  warning: {s.warning}")
    slow = plan.slowest_restart
    if not plan.stores:
        lines.append("no store can be planned")
    elif slow is not None:
        lines.append(
            f"\nslowest restart: partition {slow.partition}, about {fmt_bytes(slow.bytes)} on "
            "disk (the one snapshot the rewrite writes; size estimated from the bytes on disk "
            "per stored byte now)"
        )
    if plan.stores:
        lines.append(
            f"rewrite: about {plan.rewrite_seconds:.0f} s for {fmt_bytes(plan.total_bytes)} of "
            f"state — an estimate, {REWRITE_MODEL.overhead_s:g} s + "
            f"{REWRITE_MODEL.bytes_per_s / 1e6:.1f} MB/s, {REWRITE_MODEL.basis}"
        )
    for where, why in plan.refusals:
        lines.append(f"Spark would refuse to repartition ({where}): {why}")
    lines += _ways_text(ways)
    return "\n".join(lines) + "\n"


def _ways_text(ways: Sequence[RepartitionWay]) -> list[str]:
    if not ways:
        return []
    lines = ["", "to carry it out (stop the query first):"]
    for way in ways:
        # Spark's own refusal is printed in full just above.
        why = "Spark refuses (above)" if way.tool.startswith("Spark") else way.refusal
        lines.append(f"  {way.tool}: " + (f"does not apply: {why}" if way.refusal else way.command))
    if any(w.tool == "stateglass rewrite" and not w.refusal for w in ways):
        lines.append(
            "  (the rewrite prints its plan; add --apply to write the new checkpoint, then "
            "restart the query on it)"
        )
    return lines


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}×"
