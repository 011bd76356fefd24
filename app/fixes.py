"""The fixes ``stateglass rewrite`` makes for what the dashboard finds, as text to run.

A finding (keys the watermark should have evicted, new keys that one key value brings, a
checkpoint that will not restart) becomes a :class:`Fix`: the ``stateglass rewrite`` dry run
with its predicate or batch filled in, and the catalog query that lists the keys it removes.
Pure text, like :mod:`.sql_examples`: nothing is read or written here. The dashboard shows the
command and, on request, its dry run (the same plan: :mod:`.render.rewrite_dry_run`).

Example::

    fix = growth_fix("/data/cp", ref, 0, "default", attribution.lead)  # customer_id = null
    fix.command
    # stateglass rewrite /data/cp /data/cp-dropped --drop-keys 0/default 'key."customer_id" IS NULL'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stateglass.app.analysis.rewrite_command import rewrite_command
from stateglass.app.sql_examples import (
    LIMIT,
    LeakTarget,
    field_path,
    literal,
    overdue_keys,
    store_rows,
    table_ref,
)
from stateglass.collectors.catalog.names import schema_names

if TYPE_CHECKING:
    from stateglass.app.browse.growth import Contributor


@dataclass(frozen=True)
class Fix:
    """One way out of a finding: what it does, the rewrite's dry run, the keys it touches."""

    title: str
    why: str  # what the rewrite changes, and what it cannot
    checkpoint: str
    drop_keys: tuple[tuple[str, str], ...] = ()  # (store, predicate) as --drop-keys takes them
    batch_id: int | None = None  # --batch-id: the batch DST ends at
    query: str | None = None  # the catalog query listing the rows removed (None: none are)

    @property
    def command(self) -> str | None:
        """The dry run (the user adds --apply); None when no rewrite fixes the finding."""
        if not self.drop_keys and self.batch_id is None:
            return None
        return rewrite_command(self.checkpoint, drop_keys=self.drop_keys, batch_id=self.batch_id)


def store_arg(operator_id: int, label: str) -> str:
    """A store as ``--drop-keys`` and ``stateglass state`` name it: ``0/default``."""
    return f"{int(operator_id)}/{label}"


def leak_fix(checkpoint: str, ref: str, operator_id: int, target: LeakTarget, wm: int) -> Fix:
    """The rows older than the watermark (what Spark should have evicted), dropped."""
    predicate = target.where(wm)
    return Fix(
        title=f"Remove what the watermark missed in operator {operator_id} / {target.label}",
        why=(
            "writes a new checkpoint without the keys whose event time is at or before the "
            f"watermark ({int(wm)} ms), as if Spark had evicted them; the query restarts on it "
            "with the rest of its state. It does not stop new keys from leaking: that needs "
            "the query's watermark or eviction fixed."
        ),
        checkpoint=checkpoint,
        drop_keys=((store_arg(operator_id, target.label), predicate),),
        query=overdue_keys(ref, target, wm),
    )


def growth_fix(
    checkpoint: str, ref: str, operator_id: int, label: str, top: Contributor
) -> Fix | None:
    """The keys carrying the value most new keys carry (``customer_id = null``), dropped;
    None when the value cannot be written as a SQL literal."""
    test = value_test(top.value)
    if test is None:
        return None
    predicate = f"{field_path('key', top.field)} {test}"
    return Fix(
        title=f"Remove the keys with {top.label} from operator {operator_id} / {label}",
        why=(
            f"{top.share:.0%} of the new keys carry {top.label}. The rewrite writes a new "
            "checkpoint without every key that does (old and new); the query restarts on it "
            "and builds them again if its input still brings them."
        ),
        checkpoint=checkpoint,
        drop_keys=((store_arg(operator_id, label), predicate),),
        query=f"SELECT *\nFROM {ref}\nWHERE {predicate}\nLIMIT {LIMIT}",
    )


def unbounded_fix(
    checkpoint: str, ref: str, operator_id: int, label: str, idle_since: int | None
) -> Fix:
    """State Spark never removes: no rewrite stops it. With ``idle_since`` (a retained batch
    older than the last), the keys whose row has not changed since it, dropped."""
    cause = (
        "No rewrite stops this: Spark removes none of these keys, so a rewrite only shrinks the "
        "state once, and it grows again from the next batch. The fix is in the query: a "
        "watermark and a window of its column (or the watermarked column in the key), or a TTL "
        "in transformWithState; the state_leak finding names the cause."
    )
    if idle_since is None:
        return Fix(
            title=f"State that only grows in operator {operator_id} / {label}",
            why=(
                f"{cause} Only one batch's state is retained, so no key can be told idle: "
                "the State page's growth attribution finds a value most new keys carry and "
                "offers `--drop-keys` for it. The query below lists the store's rows."
            ),
            checkpoint=checkpoint,
            query=store_rows(ref),
        )
    # The rewrite's catalog holds this one checkpoint: its schema is named from the path alone.
    own = table_ref(schema_names([checkpoint])[checkpoint], operator_id, label)
    return Fix(
        title=(
            f"Remove the keys idle since batch {idle_since} from operator {operator_id} / {label}"
        ),
        why=(
            f"{cause} Until then, the rewrite writes a new checkpoint without the keys whose "
            f"row is the same as at batch {idle_since}, the oldest retained: sessions or ids "
            "the input stopped bringing. One that comes back starts again from nothing."
        ),
        checkpoint=checkpoint,
        drop_keys=((store_arg(operator_id, label), _unchanged_since(own, idle_since)),),
        query=f"SELECT *\nFROM {ref}\nWHERE {_unchanged_since(ref, idle_since)}\nLIMIT {LIMIT}",
    )


def _unchanged_since(ref: str, batch: int) -> str:
    """A row of the last batch that is the same at ``batch``: a key nothing has touched."""
    return f"(key, value) IN (SELECT key, value FROM {ref} WHERE batch_id = {int(batch)})"


def restart_fix(checkpoint: str, batch: int) -> Fix:
    """A new checkpoint ending at ``batch``, the newest whose state is whole."""
    return Fix(
        title=f"Roll back to batch {batch}",
        why=(
            f"writes a new checkpoint that ends at batch {batch}, the newest whose state is "
            "whole, from that batch's state: the batches after it are planned again from the "
            f"sources' offsets of batch {batch} (the dry run says which sources can replay). "
            "The source checkpoint is left as it is: nothing is moved aside."
        ),
        checkpoint=checkpoint,
        batch_id=batch,
    )


def value_test(value: str) -> str | None:
    """A growth contributor's value (JSON-like text: ``null``, ``42``, ``"eu-1"``, or a cell's
    text such as a timestamp) as a SQL test on its column."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return f"= {literal(value)}"  # a timestamp's or decimal's text: DuckDB casts it
    if parsed is None:
        return "IS NULL"
    if isinstance(parsed, bool):
        return "= true" if parsed else "= false"
    if isinstance(parsed, (int, float)):
        return f"= {value}"
    if isinstance(parsed, str):
        return f"= {literal(parsed)}"
    return None
