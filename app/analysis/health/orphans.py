"""Orphans: temporary files left behind, and SSTs that no live zip references."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from stateglass.app.analysis.health.base import (
    OK,
    WARN,
    Context,
    Facts,
    Finding,
    query_finding,
)
from stateglass.parsers.units import fmt_bytes, fmt_duration

if TYPE_CHECKING:
    from stateglass.app.analysis.thresholds import HealthConfig

# SSTs of a partition whose live zips all have their references recorded (sst_files_live is
# set), that no live zip references, and that are older than the partition's newest zip (a
# newer one may belong to a version being uploaded right now). Of any age: the clock picks
# those old enough (``Orphans.at``).
_UNREFERENCED_SSTS = """
    WITH zips AS (
        SELECT operator_id, store_name, partition_id, version, max(modified_at) AS mtime
        FROM state_files WHERE checkpoint = $cp AND kind = 'zip' AND NOT purged
        GROUP BY ALL
    ),
    unknown AS (
        SELECT DISTINCT z.operator_id, z.store_name, z.partition_id
        FROM zips z LEFT JOIN state_versions v
          ON v.checkpoint = $cp AND v.operator_id = z.operator_id
         AND v.store_name = z.store_name AND v.partition_id = z.partition_id
         AND v.version = z.version
        WHERE v.sst_files_live IS NULL
    ),
    newest AS (
        SELECT operator_id, store_name, partition_id, max(mtime) AS newest_zip
        FROM zips GROUP BY ALL
    ),
    referenced AS (
        SELECT DISTINCT r.operator_id, r.store_name, r.partition_id, r.sst_file
        FROM sst_refs r JOIN zips z
          ON z.operator_id = r.operator_id AND z.store_name = r.store_name
         AND z.partition_id = r.partition_id
         AND z.version BETWEEN r.first_version AND r.last_version
        WHERE r.checkpoint = $cp
    )
    SELECT s.path, s.size_bytes, s.modified_at
    FROM state_files s
    JOIN newest n USING (operator_id, store_name, partition_id)
    WHERE s.checkpoint = $cp AND s.kind = 'sst' AND NOT s.purged
      AND s.modified_at <= n.newest_zip
      AND NOT EXISTS (
          SELECT 1 FROM unknown u
          WHERE u.operator_id = s.operator_id AND u.store_name = s.store_name
            AND u.partition_id = s.partition_id)
      AND NOT EXISTS (
          SELECT 1 FROM referenced r
          WHERE r.operator_id = s.operator_id AND r.store_name = s.store_name
            AND r.partition_id = s.partition_id
            AND r.sst_file = regexp_extract(s.path, '[^/]+$'))
    ORDER BY s.modified_at, s.path
"""

# (modified_at, files, bytes) from the oldest: the files of one mtime, or all those already
# old enough when the facts were read (one entry, at the oldest one's mtime).
Ages = list[list[float]]
KINDS = ("temporary files", "unreferenced SSTs")


class Orphans:
    id = "orphans"
    title = "Orphans"
    hint = (
        "Files no version uses: temporary files of writes that never finished (a task died "
        "before renaming them) and SSTs no zip references (uploads of failed attempts, or "
        "maintenance that did not delete them). They only cost storage; delete them while the "
        "query is stopped, after checking they are older than any running batch."
    )

    def check(self, ctx: Context) -> list[Finding]:
        return self.at(self.facts(ctx), ctx.now, ctx.config)

    def facts(self, ctx: Context) -> dict[str, Any]:
        """Each kind's candidates by age, and its oldest file (the finding's example)."""
        settled = _seconds(ctx.now) - ctx.config.orphans.min_age_seconds
        temps = ctx.rows(
            "SELECT path, size_bytes, modified_at FROM temp_files WHERE checkpoint = ? "
            "ORDER BY modified_at, path"
        )
        ssts = ctx.conn.execute(_UNREFERENCED_SSTS, {"cp": ctx.checkpoint}).fetchall()
        return {
            kind: {"ages": _ages(rows, settled), "oldest": _relative(rows[0][0], ctx.checkpoint)}
            for kind, rows in zip(KINDS, (temps, ssts), strict=True)
            if rows
        }

    def at(self, facts: Facts, now: datetime, config: HealthConfig) -> list[Finding]:
        cfg = config.orphans
        now_s = _seconds(now)
        before = now_s - cfg.min_age_seconds
        parts = []
        for kind in KINDS:
            found = facts.get(kind) or {"ages": [], "oldest": ""}
            ages = [a for a in found["ages"] if a[0] <= before]
            if ages:
                files = sum(int(a[1]) for a in ages)
                total = sum(int(a[2]) for a in ages)
                oldest = fmt_duration(now_s - ages[0][0])
                parts.append(
                    f"{files} {kind} ({fmt_bytes(total)}, oldest {oldest} old, "
                    f"e.g. {found['oldest']})"
                )
        limit = f"files younger than {fmt_duration(cfg.min_age_seconds)} are not counted"
        if parts:
            return [query_finding(self, WARN, "; ".join(parts) + f"; {limit}", self.hint)]
        return [query_finding(self, OK, f"no temporary files or unreferenced SSTs; {limit}")]


def _seconds(moment: datetime) -> float:
    """Epoch seconds of a naive UTC moment, as file mtimes are kept."""
    return moment.replace(tzinfo=UTC).timestamp()


def _ages(rows: Sequence[tuple[Any, ...]], settled: float) -> Ages:
    """``(path, size, mtime)`` rows, oldest first, as :data:`Ages`: files at or before
    ``settled`` (old enough at any moment the facts hold) in one entry, the younger ones
    per mtime, since the clock counts them one by one."""
    ages: Ages = []
    for _, size, mtime in rows:
        last = ages[-1] if ages else None
        if last is not None and (last[0] == mtime or mtime <= settled):
            last[1] += 1
            last[2] += size
        else:
            ages.append([mtime, 1, size])
    return ages


def _relative(path: str, root: str) -> str:
    return path[len(root) + 1 :] if path.startswith(root + "/") else path
