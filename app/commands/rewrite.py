"""``stateglass rewrite``: a new checkpoint with another partition count or provider.

Examples::

    stateglass rewrite /data/cp/orders /data/cp/orders-16 --partitions 16          # the plan
    stateglass rewrite /data/cp/orders /data/cp/orders-16 --partitions 16 --apply  # writes
    stateglass rewrite /data/cp/orders /data/cp/orders-at-41 --batch-id 41 --apply  # rollback
    stateglass rewrite /data/cp/orders /data/cp/clean --drop-keys 0/default "key.k IS NULL"

Dry run by default: prints the plan (keys and bytes per new partition, skew, the confs and
operator metadata that change, the store partitions that get a full snapshot, a time
estimate) and what the edits (``--drop-keys``, ``--evict-expired``) remove. ``--apply``
writes DST through a temporary sibling, reads it back, and renames it only when every store
partition holds exactly the rows meant (an object-store DST: a local staging tree, uploaded
with ``metadata`` last). SRC is only read.

Exit status: 0 written (or a plan that can be carried out), 2 refused or failed, with one
line; nothing is left at DST. docs/rewrite.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from stateglass.app.args import CHECKPOINT_HELP

if TYPE_CHECKING:
    from stateglass.app.analysis.rewrite import RewritePlan
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.engines.forked import ForkedPool
    from stateglass.collectors.rewrite.base import WriteTarget
    from stateglass.collectors.rewrite.destination import Destination


def add_parser(subparsers: Any) -> None:
    """Register ``rewrite`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "rewrite",
        help="write a NEW checkpoint with another partition count or state store provider, or "
        "with keys left out (--drop-keys, --evict-expired)",
    )
    p.add_argument("src", metavar="SRC", help=CHECKPOINT_HELP + " (only read)")
    p.add_argument(
        "dst",
        metavar="DST",
        help="the new checkpoint, a path or an object-store URL (s3://, gs://, abfss://): must not "
        "exist, or be empty",
    )
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
        help="the committed batch whose state DST starts from (default: the last committed); "
        "an older retained batch rolls back: DST ends at B and its restart replays from B + 1",
    )
    _add_edit_args(p)
    p.add_argument("--apply", action="store_true", help="write DST (default: print the plan only)")
    p.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="with --apply: new partitions of a big store written in parallel (default: one "
        "per CPU core; 1 = no worker processes)",
    )
    p.add_argument(
        "--verify-with-spark",
        action="store_true",
        help="with --apply: also read DST with Spark's state reader before it is renamed into "
        "place (needs pyspark and Java; not with an edit)",
    )


def _add_edit_args(p: argparse.ArgumentParser) -> None:
    """The edits: keys left out of DST, and the watermark they are judged by."""
    p.add_argument(
        "--drop-keys",
        nargs=2,
        action="append",
        default=[],
        metavar=("STORE", "PREDICATE"),
        help="leave out of DST the keys whose rows match PREDICATE, SQL over the store's "
        'catalog table (key, value, partition_id), e.g. 0/default "key.k IS NULL"; STORE '
        "as `state` names it (<operator id>/<store name>) or its `sql` table (op0_default). "
        "A join key leaves both stores of its side; a transformWithState grouping key "
        "leaves every state variable, timer and TTL entry (0/default: PREDICATE over the "
        "grouping keys; a variable's table, op0_<variable>: over its rows). Repeatable",
    )
    p.add_argument(
        "--evict-expired",
        action="store_true",
        help="leave out of DST what Spark's event-time eviction removes at the watermark of "
        "the batch (its offsets' batchWatermarkMs): ended windows and sessions, dedup "
        "entries and join keys past it, as the eviction audit counts them",
    )
    p.add_argument(
        "--watermark",
        default=None,
        metavar="TIME",
        help="with --evict-expired: raise the batch's watermark to TIME (ISO-8601, UTC unless "
        "it names a zone, or epoch milliseconds) before evicting, as after lowering the "
        "query's withWatermark delay; DST's last offsets entry records it, so the restart goes "
        "on from it (a watermark only rises: one below the batch's is refused)",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="let --drop-keys or --evict-expired remove every key of a store (refused otherwise)",
    )


def run(args: argparse.Namespace) -> int:
    """``stateglass rewrite``: the plan; with ``--apply``, DST written and checked."""
    from stateglass.app.analysis.rewrite import plan_rewrite
    from stateglass.app.analysis.rewrite_edits import DropKeys
    from stateglass.app.analysis.rewrite_refusals import RewriteRequest
    from stateglass.app.render.rewrite_dry_run import edits_text
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint
    from stateglass.collectors.errors import RewriteRefused

    cp = Checkpoint.open(args.src)
    refuse_inside_checkpoint(args.dst, "DST")
    changelog = None if args.changelog is None else args.changelog == "on"
    drop_keys = tuple(DropKeys(store, predicate) for store, predicate in args.drop_keys)
    if args.watermark is not None and not args.evict_expired:
        raise RewriteRefused(
            args.src,
            "--watermark needs --evict-expired: it raises the watermark eviction judges by",
        )
    if (drop_keys or args.evict_expired) and args.verify_with_spark:
        # Spark's reader check compares DST with SRC's rows, which an edit changes by design.
        raise RewriteRefused(args.src, "--verify-with-spark cannot judge an edited state")
    request = RewriteRequest(
        args.partitions,
        args.provider,
        changelog,
        args.batch_id,
        drop_keys=drop_keys,
        allow_empty=args.allow_empty,
        evict_expired=args.evict_expired,
        watermark_ms=None if args.watermark is None else _epoch_ms(args.watermark),
    )
    with _workers(args.jobs or os.cpu_count() or 1, cp.root) as writers:
        plan = plan_rewrite(cp, request, keep_targets=args.apply, workers=writers)
        sys.stdout.write(plan_text(plan, args.dst))
        sys.stdout.write(edits_text(cp, plan))
        if plan.refusals:
            where, why = plan.refusals[0]
            others = len(plan.refusals) - 1
            more = f" (and {others} more reasons above)" if others else ""
            raise RewriteRefused(args.src, f"{where}: {why}{more}")
        if not args.apply:
            sys.stdout.write("dry run: nothing written (--apply writes DST)\n")
            return 0
        started = time.monotonic()
        apply(cp, plan, args.dst, args.verify_with_spark, writers)
    checks = "self-check and Spark's reader" if args.verify_with_spark else "self-check"
    sys.stdout.write(f"wrote {args.dst} in {time.monotonic() - started:.1f} s, {checks} passed\n")
    return 0


def _epoch_ms(text: str) -> int:
    """``--watermark``: epoch milliseconds, or an ISO-8601 time."""
    from stateglass.app.args import utc_time

    if text.strip().isdigit():
        return int(text)
    return int(utc_time(text, "--watermark").timestamp() * 1000)


def apply(
    cp: Checkpoint,
    plan: RewritePlan,
    dst: str,
    with_spark: bool = False,
    writers: ForkedPool | None = None,
) -> None:
    """Write DST for ``plan``: temporary tree, logs, every store (a big one's partitions by
    the ``writers``), self-check (and Spark's reader), rename."""
    from stateglass.app.analysis.rewrite_refusals import is_format_v2
    from stateglass.collectors.rewrite.object_store import create_destination

    dest = create_destination(dst)
    try:
        conf = {k: new for k, _, new in plan.conf_changes}
        raised = plan.edits.watermark
        dest.copy_logs(
            cp, plan.batch_id, conf, plan.partitions, None if raised is None else raised[1]
        )
        v2 = is_format_v2(cp, plan.batch_id)
        unique_ids: dict[int, list[list[str]]] = {}
        for store in cp.stores():
            ids = _write_store(cp, plan, dest, store, v2, writers)
            by_partition = unique_ids.setdefault(store.operator_id, [[] for _ in ids])
            for partition, unique_id in enumerate(ids):
                by_partition[partition].append(unique_id)
        if v2:
            dest.set_state_unique_ids(plan.batch_id, unique_ids)
        if with_spark:
            from stateglass.collectors.rewrite.spark_check import verify_with_spark

            stores = [(s.operator_id, s.store_name) for s in cp.stores()]
            verify_with_spark(
                cp.root, dest.root, plan.batch_id, stores, plan.partitions, plan.last_field_unhashed
            )
    except BaseException:
        dest.discard()
        raise
    dest.commit()


# A store with fewer rows is written in this process: the workers cost more than they save.
PARALLEL_ROWS = 200_000
# One new partition to write: its target, the provider writing it, its rows as SRC stores them.
_Task = tuple["WriteTarget", str, list[tuple[bytes, bytes]]]


def _write_store(
    cp: Checkpoint,
    plan: RewritePlan,
    dest: Destination,
    store: Any,
    v2: bool,
    writers: ForkedPool | None,
) -> list[str]:
    """Every new partition of ``store``: its rows sent where Spark's hash sends them, written
    by the destination provider's writer, then read back; a big store's partitions by the
    ``writers``. With checkpoint format ``v2`` each partition's files get a new unique id; the
    ids, per partition."""
    from stateglass.app.analysis.rewrite import assigned_rows
    from stateglass.collectors.rewrite.base import WriteTarget

    buckets: list[list[tuple[bytes, bytes]]] = [[] for _ in range(plan.partitions)]
    keeps = plan.edits.keeps(store)
    for _, new_partition, key, value in assigned_rows(cp, store, plan):
        if keeps is None or keeps(key):
            buckets[new_partition].append((key, value))
    now_ms = int(time.time() * 1000)
    unique_ids = [str(uuid.uuid4()) if v2 else "" for _ in buckets]
    tasks = (
        (
            WriteTarget(
                store_dir=dest.checkpoint.store_dir(store.operator_id, p, store.store_name),
                version=plan.version,
                partition=p,
                store=store,
                codec=plan.codec,
                row_checksum=plan.row_checksum,
                file_checksum=plan.file_checksum,
                changelog=plan.changelog,
                timestamp_ms=now_ms,
                unique_id=unique_ids[p] or None,
            ),
            plan.provider,
            rows,
        )
        for p, rows in enumerate(buckets)
    )
    if writers is not None and sum(map(len, buckets)) >= PARALLEL_ROWS:
        for _ in writers.results(_write_partition, tasks, ordered=False):
            pass
    else:
        for task in tasks:
            _write_partition(task)
    return unique_ids


def _write_partition(task: _Task) -> None:
    """One new partition: SRC's rows made neutral, written, read back and compared."""
    from stateglass.collectors.rewrite import neutralizer, writer_class
    from stateglass.collectors.rewrite.selfcheck import check_partition

    target, provider, raw = task
    to_neutral = neutralizer(target.store.provider)
    rows = list(
        to_neutral(target.store, raw, row_checksum=target.row_checksum, where=target.store_dir)
    )
    writer_class(provider)().write_partition(target, rows)
    check_partition(target, provider, rows)


@contextlib.contextmanager
def _workers(jobs: int, where: str) -> Iterator[ForkedPool | None]:
    """``jobs`` worker processes that read and hash SRC's partitions for the plan and write
    the new ones, or None for one job. They are forked before this process reads any state:
    a RocksDB database opened here starts background threads that a fork does not carry, and
    one the workers opened after would wait for them forever. They die with this process (a
    killed rewrite leaves none writing); their scratch goes under one directory removed at
    the end."""
    import multiprocessing
    import shutil
    import tempfile

    from stateglass.collectors.engines.forked import ForkedPool

    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        yield None
        return
    scratch = tempfile.mkdtemp(prefix="stateglass-rewrite-jobs-")
    saved_tempdir, tempfile.tempdir = tempfile.tempdir, scratch
    try:
        with ForkedPool(where, jobs, initializer=_worker_start, initargs=(os.getpid(),)) as pool:
            pool.start()
            yield pool
    finally:
        tempfile.tempdir = saved_tempdir
        shutil.rmtree(scratch, ignore_errors=True)


def _worker_start(parent: int) -> None:
    from stateglass.collectors.engines.signals import die_with_parent, restore_default_signals

    restore_default_signals()
    die_with_parent(parent)


def plan_text(plan: RewritePlan, dst: str) -> str:
    """The plan: the planner's tables, then what the rewrite changes and writes."""
    from stateglass.app.commands.plan_partitions import plan_text as partition_text
    from stateglass.app.render.rewrite_dry_run import rollback_text
    from stateglass.parsers.units import utc_ms

    lines = [
        f"rewrite {plan.checkpoint} → {dst}: state of batch {plan.batch_id} written as "
        f"version {plan.version}, provider {plan.source_provider} → {plan.provider}",
        partition_text(plan.partitioning).rstrip("\n"),
        "",
        "pinned confs changed in the last offsets entry:",
    ]
    lines += [f"  {k}: {old} → {new}" for k, old, new in plan.conf_changes] or ["  none"]
    if plan.edits.watermark is not None:
        before, after = plan.edits.watermark
        lines.append(
            f"watermark raised in the last offsets entry: batchWatermarkMs {before} "
            f"({utc_ms(before)} UTC) → {after} ({utc_ms(after)} UTC)"
        )
    lines.append("operator metadata:")
    lines += [f"  {change}" for change in plan.metadata_changes] or ["  unchanged"]
    lines.append(
        f"files: one full version ({plan.provider}) in each of {len(plan.files)} store "
        f"partition directories ({plan.files[0] if plan.files else '-'}, …); metadata, "
        f"offsets/ and commits/ up to batch {plan.batch_id}, sources/ cut there, schema files "
        "copied"
    )
    if plan.rollback is not None:
        lines += rollback_text(plan.rollback)
    for where, why in plan.refusals:
        lines.append(f"refused ({where}): {why}")
    return "\n".join(lines) + "\n"
