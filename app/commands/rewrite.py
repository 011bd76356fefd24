"""``stateglass rewrite``: a new checkpoint with another partition count or provider.

Examples::

    stateglass rewrite /data/cp/orders /data/cp/orders-16 --partitions 16          # the plan
    stateglass rewrite /data/cp/orders /data/cp/orders-16 --partitions 16 --apply  # writes

Dry run by default: prints the plan (keys and bytes per new partition, skew, the confs and
operator metadata that change, the store partitions that get a full snapshot, a time
estimate). ``--apply`` writes DST through a temporary sibling, reads it back, and renames it
only when every store partition holds exactly the rows meant. SRC is only read.

Exit status: 0 written (or a plan that can be carried out), 2 refused or failed, with one
line; nothing is left at DST. docs/rewrite.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from stateglass.app.args import CHECKPOINT_HELP

if TYPE_CHECKING:
    from stateglass.app.analysis.rewrite import RewritePlan
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.rewrite.destination import Destination


def add_parser(subparsers: Any) -> None:
    """Register ``rewrite`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "rewrite",
        help="write a NEW checkpoint with another partition count or state store provider",
    )
    p.add_argument("src", metavar="SRC", help=CHECKPOINT_HELP + " (only read)")
    p.add_argument("dst", metavar="DST", help="the new checkpoint: must not exist, or be empty")
    p.add_argument(
        "--partitions",
        type=int,
        default=None,
        metavar="N",
        help="spark.sql.shuffle.partitions of DST (default: SRC's); each key goes where "
        "Spark's hash sends it",
    )
    p.add_argument("--provider", default=None, help="state store provider of DST: hdfs or rocksdb")
    p.add_argument(
        "--changelog",
        choices=("on", "off"),
        default=None,
        help="RocksDB changelog checkpointing in DST's pinned confs (default: SRC's)",
    )
    p.add_argument(
        "--batch-id",
        type=int,
        default=None,
        metavar="B",
        help="the committed batch whose state DST starts from (default: the last committed)",
    )
    p.add_argument("--apply", action="store_true", help="write DST (default: print the plan only)")
    p.add_argument(
        "--verify-with-spark",
        action="store_true",
        help="with --apply: also read DST with Spark's state reader before it is renamed into "
        "place (needs pyspark and Java)",
    )


def run(args: argparse.Namespace) -> int:
    """``stateglass rewrite``: the plan; with ``--apply``, DST written and checked."""
    from stateglass.app.analysis.rewrite import plan_rewrite
    from stateglass.app.analysis.rewrite_refusals import RewriteRequest
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint
    from stateglass.collectors.errors import RewriteRefused

    cp = Checkpoint.open(args.src)
    refuse_inside_checkpoint(args.dst, "DST")
    changelog = None if args.changelog is None else args.changelog == "on"
    request = RewriteRequest(args.partitions, args.provider, changelog, args.batch_id)
    plan = plan_rewrite(cp, request, keep_targets=args.apply)
    sys.stdout.write(plan_text(plan, args.dst))
    if plan.refusals:
        where, why = plan.refusals[0]
        more = (
            f" (and {len(plan.refusals) - 1} more reasons above)" if len(plan.refusals) > 1 else ""
        )
        raise RewriteRefused(args.src, f"{where}: {why}{more}")
    if not args.apply:
        sys.stdout.write("dry run: nothing written (--apply writes DST)\n")
        return 0
    started = time.monotonic()
    apply(cp, plan, args.dst, args.verify_with_spark)
    checks = "self-check and Spark's reader" if args.verify_with_spark else "self-check"
    sys.stdout.write(f"wrote {args.dst} in {time.monotonic() - started:.1f} s, {checks} passed\n")
    return 0


def apply(cp: Checkpoint, plan: RewritePlan, dst: str, with_spark: bool = False) -> None:
    """Write DST for ``plan``: temporary tree, logs, every store, self-check (and Spark's
    reader), rename."""
    from stateglass.collectors.rewrite.destination import Destination

    dest = Destination.create(dst)
    try:
        conf = {k: new for k, _, new in plan.conf_changes}
        dest.copy_logs(cp, plan.batch_id, conf, plan.partitions)
        for store in cp.stores():
            _write_store(cp, plan, dest, store)
        if with_spark:
            from stateglass.collectors.rewrite.spark_check import verify_with_spark

            stores = [(s.operator_id, s.store_name) for s in cp.stores()]
            verify_with_spark(cp.root, dest.root, plan.batch_id, stores, plan.partitions)
    except BaseException:
        dest.discard()
        raise
    dest.commit()


def _write_store(cp: Checkpoint, plan: RewritePlan, dest: Destination, store: Any) -> None:
    """Every new partition of ``store``: its rows sent where Spark's hash sends them, written
    by the destination provider's writer, then read back."""
    from stateglass.app.analysis.rewrite import assigned_rows
    from stateglass.collectors.rewrite import neutralizer, writer_class
    from stateglass.collectors.rewrite.base import WriteTarget
    from stateglass.collectors.rewrite.selfcheck import check_partition

    buckets: list[list[tuple[bytes, bytes]]] = [[] for _ in range(plan.partitions)]
    for _, new_partition, key, value in assigned_rows(cp, store, plan):
        buckets[new_partition].append((key, value))
    to_neutral = neutralizer(store.provider)
    writer = writer_class(plan.provider)()
    now_ms = int(time.time() * 1000)
    for partition, raw in enumerate(buckets):
        where = dest.checkpoint.store_dir(store.operator_id, partition, store.store_name)
        rows = list(to_neutral(store, raw, row_checksum=plan.row_checksum, where=where))
        target = WriteTarget(
            store_dir=where,
            version=plan.version,
            partition=partition,
            store=store,
            codec=plan.codec,
            row_checksum=plan.row_checksum,
            file_checksum=plan.file_checksum,
            changelog=plan.changelog,
            timestamp_ms=now_ms,
        )
        writer.write_partition(target, rows)
        check_partition(target, plan.provider, rows)


def plan_text(plan: RewritePlan, dst: str) -> str:
    """The plan: the planner's tables, then what the rewrite changes and writes."""
    from stateglass.app.commands.plan_partitions import plan_text as partition_text

    lines = [
        f"rewrite {plan.checkpoint} → {dst}: state of batch {plan.batch_id} written as "
        f"version {plan.version}, provider {plan.source_provider} → {plan.provider}",
        partition_text(plan.partitioning).rstrip("\n"),
        "",
        "pinned confs changed in the last offsets entry:",
    ]
    lines += [f"  {k}: {old} → {new}" for k, old, new in plan.conf_changes] or ["  none"]
    lines.append("operator metadata:")
    lines += [f"  {change}" for change in plan.metadata_changes] or ["  unchanged"]
    lines.append(
        f"files: one full version ({plan.provider}) in each of {len(plan.files)} store "
        f"partition directories ({plan.files[0] if plan.files else '-'}, …); metadata, "
        f"offsets/ and commits/ up to batch {plan.batch_id}, sources/, schema files copied"
    )
    for where, why in plan.refusals:
        lines.append(f"refused ({where}): {why}")
    return "\n".join(lines) + "\n"
