"""Retention: how many committed batches can still be read back, against minBatchesToRetain."""

from __future__ import annotations

from stateglass.app.analysis.chain_files import bad_state_files
from stateglass.app.analysis.health.base import OK, WARN, Context, Finding
from stateglass.app.analysis.health.versions import PartitionCounts, live_chain_files
from stateglass.collectors.text import ranges

MIN_BATCHES_CONF = "spark.sql.streaming.minBatchesToRetain"


class Retention:
    id = "retention"
    title = "Retention"
    hint = (
        "Spark keeps the files of the last spark.sql.streaming.minBatchesToRetain batches; "
        "fewer readable batches limit restarting from an older batch and reading old state "
        "(stateglass, Spark's state reader). Raise minBatchesToRetain, or, if the cluster runs "
        "a lower value on purpose, set [spark] min_batches_to_retain. If files were deleted by "
        "hand, see the holes rule."
    )

    def check(self, ctx: Context) -> list[Finding]:
        retain, source = ctx.spark_conf(MIN_BATCHES_CONF, "min_batches_to_retain")
        last = ctx.rows("SELECT max(batch_id) FROM batches WHERE checkpoint = ? AND committed")[0][
            0
        ]
        if not ctx.stores:
            return [ctx.finding(self, OK, "no state stores")]
        if last is None:
            return [ctx.finding(self, OK, "no batch committed yet")]
        chains = live_chain_files(ctx)
        # Batch B reads state version B + 1, in every partition of every store.
        # A repartition changes the partitions a batch needs: count each batch's own.
        readable: set[int] = set(range(last + 1))
        for store in ctx.stores:
            counts = PartitionCounts.of(ctx, store.num_partitions or 0)
            per_part = []
            for part in range(counts.most()):
                files = chains.get((store.operator_id, store.store_name, part))
                per_part.append({v - 1 for v in files.readable()} if files else set())
            readable = _readable_in_every_partition(readable, per_part, counts)
        # Restarting from (or reading) batch B also needs its offsets/B and commits/B.
        logs: dict[str, set[int]] = {"offsets": set(), "commits": set()}
        bad = bad_state_files(ctx)
        for (path,) in ctx.rows("SELECT path FROM log_files WHERE checkpoint = ?"):
            if path in bad:
                continue
            folder, _, name = path.rpartition("/")
            kind = folder.rpartition("/")[2]
            if kind in logs and name.isdigit():
                logs[kind].add(int(name))
        readable = readable & logs["offsets"] & logs["commits"]
        began = 0 if bad else _state_began(readable, logs)
        expected = min(retain, last + 1 - began)
        recent = {b for b in readable if b > last - expected}
        text = (
            f"{len(recent)} of the newest {expected} committed batches can be read back "
            f"(minBatchesToRetain {retain}, {source}); readable: batches {ranges(readable)} "
            "(state files readable, offsets/commits logs all there)"
        )
        if began:
            text += (
                f"; the state starts at batch {began}, though the logs go back to batch 0: "
                "a checkpoint written by stateglass rewrite (its state is that of one batch), "
                "or older state files removed by hand"
            )
        if len(recent) < expected:
            return [ctx.finding(self, WARN, text, self.hint)]
        return [ctx.finding(self, OK, text)]


def _state_began(readable: set[int], logs: dict[str, set[int]]) -> int:
    """The first batch whose state this checkpoint holds, when its offsets and commits logs
    were never purged (batch 0's are there): Spark purges those logs with the state, so
    readable state starting later was written so (a rewrite writes the state of its batch
    only) or removed by hand. 0 when the logs were purged: the batches then count (and, by
    the caller, when a file is damaged: damage is no start)."""
    if not readable or 0 not in logs["offsets"] or 0 not in logs["commits"]:
        return 0
    return min(readable)


def _readable_in_every_partition(
    batches: set[int], per_part: list[set[int]], counts: PartitionCounts
) -> set[int]:
    """The ``batches`` whose state version every partition their batch has can read
    (``per_part[p]``: the batches partition ``p`` can read). Walked per span of one partition
    count, from partition 0's few readable batches: a month is 259,200 batches, of which
    Spark keeps about a hundred."""
    out: set[int] = set()
    for after, through, count in counts.spans():
        need = min(count, len(per_part))

        def inside(b: int, after: int | None = after, through: int | None = through) -> bool:
            return (after is None or b > after) and (through is None or b <= through)

        if need == 0:
            out |= {b for b in batches if inside(b)}
            continue
        out |= {
            b
            for b in per_part[0]
            if b in batches and inside(b) and all(b in per_part[p] for p in range(1, need))
        }
    return out
