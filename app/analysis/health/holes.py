"""Holes: gaps in a delta or changelog chain that no snapshot bridges."""

from __future__ import annotations

from stateglass.app.analysis.chain_files import readable
from stateglass.app.analysis.health.base import ERR, OK, WARN, Context, Finding
from stateglass.app.analysis.health.versions import (
    PartitionCounts,
    gaps,
    live_chain_files,
)
from stateglass.collectors.text import ranges


class Holes:
    id = "holes"
    title = "Holes"
    hint_err = (
        "The newest state cannot be rebuilt: a restart fails (Spark: cannot read delta/"
        "changelog file). Restore the missing files from a backup or storage versioning; "
        "otherwise the query has to start from a new checkpoint (or from an older batch, "
        "deleting the later offsets/ and commits/ entries, if that batch is still whole)."
    )
    hint_warn = (
        "A newer snapshot bridges the gap, so the query can restart, but the batches in the "
        "gap cannot be read back or restarted from. Files vanished that Spark did not purge: "
        "check storage lifecycle rules and anything that cleans the checkpoint directory."
    )

    def check(self, ctx: Context) -> list[Finding]:
        last = ctx.rows("SELECT max(batch_id) FROM batches WHERE checkpoint = ? AND committed")[0][
            0
        ]
        chains = live_chain_files(ctx)
        needed = last + 1 if last is not None else None
        out: list[Finding] = []
        checked = 0
        for store in ctx.stores:
            # One finding per store, led by its first worst partition: 200 broken partitions
            # are one problem, not 200 rows.
            bad: list[tuple[str, int, str]] = []
            counts = PartitionCounts.of(ctx, store.num_partitions or 0)
            parts = range(counts.most())
            for part in parts:
                files = chains.get((store.operator_id, store.store_name, part))
                # A partition a repartition dropped needs only the versions up to it.
                own_last = counts.last_batch_of(part, last) if last is not None else None
                if files is None:
                    if needed and part < (store.num_partitions or 0):
                        text = (
                            f"partition {part} has no state files, but batch {last} is "
                            f"committed (needs version {needed})"
                        )
                        bad.append((ERR, part, text))
                    continue
                checked += 1
                found = self._partition(part, files.change, files.full, own_last)
                if found is not None:
                    bad.append(found)
            if not bad:
                continue
            status = ERR if any(b[0] == ERR for b in bad) else WARN
            _, part, text = next(b for b in bad if b[0] == status)
            if len(bad) > 1:
                text = f"{len(bad)} of {len(parts)} partitions; {text}"
            hint = self.hint_err if status == ERR else self.hint_warn
            out.append(ctx.finding(self, status, text, hint, store, part))
        if not out:
            text = (
                f"every delta/changelog chain is whole ({checked} partitions)"
                if checked
                else "no state files"
            )
            out.append(ctx.finding(self, OK, text))
        return out

    @staticmethod
    def _partition(
        part: int, change: set[int], full: set[int], last: int | None
    ) -> tuple[str, int, str] | None:
        """``(status, partition, text)`` when some version in the chain cannot be rebuilt."""
        present = change | full
        needed = last + 1 if last is not None else 0
        lo, hi = min(present), max(max(present), needed)
        ok = readable(change, full)  # no bad files named: what the files alone rebuild
        broken = gaps(ok, lo, hi)
        if not broken:
            return None
        missing = gaps(present, lo, hi)
        what = f"no file for versions {ranges(missing)}" if missing else "unreadable"
        text = (
            f"partition {part}: {what}; versions {ranges(broken)} cannot be rebuilt "
            f"(files cover {lo}..{max(present)}"
            + (f", last committed batch {last} needs {needed}" if last is not None else "")
            + ")"
        )
        if hi in ok:
            bridge = min(v for v in ok if v > max(broken))
            return WARN, part, f"{text}; snapshot at {bridge} bridges it"
        return ERR, part, text
