"""What a ``stateglass rewrite`` dry run says about its edits and its rollback, as text: the
keys removed per store and partition, the bytes saved, the first rows removed, and what a
rollback undoes. One home for the CLI's dry run and the dashboard's Plan a fix panels, which
show the same plan (:func:`stateglass.app.analysis.rewrite.plan_rewrite`); nothing is written.

Example::

    plan = plan_rewrite(cp, RewriteRequest(drop_keys=(DropKeys("0/default", "key.k = 1"),)))
    print(edits_text(cp, plan))
    # edit 0/default: 3 of 40 keys removed (288 B saved) by --drop-keys 0/default 'key.k = 1'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stateglass.app.analysis.rewrite import RewritePlan
    from stateglass.app.analysis.rollback import Rollback
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint


def dry_run_text(cp: Checkpoint, plan: RewritePlan) -> str:
    """A fix's dry run: the batch, what a rollback undoes, what the edits remove, and what
    refuses the rewrite."""
    lines = [f"state of batch {plan.batch_id}, written as version {plan.version}"]
    if plan.rollback is not None:
        lines += rollback_text(plan.rollback)
    lines += [f"refused ({where}): {why}" for where, why in plan.refusals]
    return "\n".join(lines) + "\n" + edits_text(cp, plan)


def rollback_text(rollback: Rollback) -> list[str]:
    """What a rollback undoes, what each source replays, and what the sink does."""
    b, last = rollback.batch_id, rollback.last_committed
    lines = [
        f"rollback: batches {b + 1}..{last} are undone; the restart on DST runs batch {b + 1} "
        f"from the sources' offsets of batch {b} (sources' logs cut there)",
        "sources:",
    ]
    lines += [f"  sources/{s.source} ({s.kind}): {s.replays}: {s.why}" for s in rollback.sources]
    lines += ["  none"] if not rollback.sources else []
    lines.append("sink:")
    lines += [f"  {line}" for line in rollback.sink]
    return lines


def edits_text(cp: Checkpoint, plan: RewritePlan) -> str:
    """What the edits remove, per store and partition, and the first rows removed as
    ``stateglass state`` prints them (one JSON object per row)."""
    from stateglass.app.output import as_struct
    from stateglass.app.render.rows_to_json import render_row
    from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource
    from stateglass.parsers.state_arrow import state_columns
    from stateglass.parsers.units import fmt_bytes

    lines: list[str] = []
    for d in plan.edits.drops:
        per_partition = ", ".join(f"{p}: {n}" for p, n in d.per_partition) or "none"
        lines += [
            f"edit {d.operator_id}/{d.store_name}: {len(d.keys)} of {d.rows} keys removed "
            f"({fmt_bytes(d.bytes_saved)} saved) by {d.why}",
            f"  keys removed per partition: {per_partition}",
        ]
        if not d.sample:
            continue
        codec = StateSource(cp, StateRequest(d.operator_id, d.store_name)).row_codec
        render = render_row(as_struct(state_columns(codec)), "UTC")
        lines.append(f"  first {len(d.sample)} rows removed:")
        lines += [
            f"    {render((*row, partition))}"
            for partition, key, value in d.sample
            for row in codec.rows(key, value)
        ]
    return "".join(line + "\n" for line in lines)
