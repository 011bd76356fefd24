"""Orphans: temporary files left behind, and SSTs that no live zip references."""

from __future__ import annotations

from datetime import UTC

from stateglass.collectors.health.base import OK, WARN, Context, Finding, fmt_bytes, fmt_seconds

# SSTs of a partition whose live zips all have their references recorded (sst_files_live is
# set), that no live zip references, and that are older than the partition's newest zip (a
# newer one may belong to a version being uploaded right now).
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
    SELECT s.operator_id, s.store_name, s.partition_id, s.path, s.size_bytes, s.modified_at
    FROM state_files s
    JOIN newest n USING (operator_id, store_name, partition_id)
    WHERE s.checkpoint = $cp AND s.kind = 'sst' AND NOT s.purged
      AND s.modified_at <= n.newest_zip AND s.modified_at <= $before
      AND NOT EXISTS (
          SELECT 1 FROM unknown u
          WHERE u.operator_id = s.operator_id AND u.store_name = s.store_name
            AND u.partition_id = s.partition_id)
      AND NOT EXISTS (
          SELECT 1 FROM referenced r
          WHERE r.operator_id = s.operator_id AND r.store_name = s.store_name
            AND r.partition_id = s.partition_id
            AND r.sst_file = regexp_extract(s.path, '[^/]+$'))
    ORDER BY s.modified_at
"""


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
        cfg = ctx.config.orphans
        now_s = ctx.now.replace(tzinfo=UTC).timestamp()
        before = now_s - cfg.min_age_seconds
        temps = ctx.rows(
            "SELECT path, size_bytes, modified_at FROM temp_files WHERE checkpoint = ? "
            "AND modified_at <= ? ORDER BY modified_at",
            [before],
        )
        ssts = [
            tuple(r)
            for r in ctx.conn.execute(
                _UNREFERENCED_SSTS, {"cp": ctx.checkpoint, "before": before}
            ).fetchall()
        ]
        parts = []
        for label, rows, size_col, time_col, path_col in (
            ("temporary files", temps, 1, 2, 0),
            ("unreferenced SSTs", ssts, 4, 5, 3),
        ):
            if rows:
                oldest = now_s - min(r[time_col] for r in rows)
                total = sum(r[size_col] for r in rows)
                example = _relative(rows[0][path_col], ctx.checkpoint)
                parts.append(
                    f"{len(rows)} {label} ({fmt_bytes(total)}, oldest {fmt_seconds(oldest)} old, "
                    f"e.g. {example})"
                )
        limit = f"files younger than {fmt_seconds(cfg.min_age_seconds)} are not counted"
        if parts:
            return [ctx.finding(self, WARN, "; ".join(parts) + f"; {limit}", self.hint)]
        return [ctx.finding(self, OK, f"no temporary files or unreferenced SSTs; {limit}")]


def _relative(path: str, root: str) -> str:
    return path[len(root) + 1 :] if path.startswith(root + "/") else path
