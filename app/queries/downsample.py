"""Charts get at most a few thousand points, however long the history: downsampling in SQL.

A month of one store is 259,200 versions. :func:`downsampled` keeps the newest versions as
they are and cuts the older ones into buckets, each drawn at its minimum and its maximum (two
points a bucket), so a spike or a drop never disappears; only the order of points within a
bucket is lost. Pages say so in the chart's caption (:func:`note`).

Example::

    sql = downsampled("SELECT version, num_keys FROM store_totals WHERE ...", ["num_keys"])
    frame = read_frame(db, sql, params)
"""

from __future__ import annotations

# Points per series a chart gets, at most (two per bucket plus the newest versions as they are).
MAX_POINTS = 2000


def _shape(points: int) -> tuple[int, int]:
    """(newest versions kept as they are, buckets for the older ones)."""
    tail = points // 4
    return tail, max(1, (points - tail) // 2)


def downsampled(
    source: str,
    columns: list[str],
    points: int = MAX_POINTS,
    x: str = "version",
    series: str | None = None,
) -> str:
    """SQL giving ``x`` and ``columns`` of ``source`` (a SELECT) with at most about ``points``
    rows per ``series`` value, ordered by (series,) x; unchanged when short enough.

    Each bucket becomes two rows: at its first ``x`` the minimum of every column, at its last
    ``x`` the maximum (NULLs are skipped, so a bucket all NULL stays a gap).
    """
    tail, buckets = _shape(points)
    keys = f"{series}, " if series else ""
    low = ", ".join(f"min({c}) AS {c}" for c in columns)
    high = ", ".join(f"max({c}) AS {c}" for c in columns)
    plain = ", ".join(f"src.{c}" for c in columns)
    # Each series is cut by its own span.
    by = f"GROUP BY {series}" if series else ""
    join = f"JOIN cut ON src.{series} IS NOT DISTINCT FROM cut.{series}" if series else ", cut"
    pick = f"src.{series}, " if series else ""
    return f"""
        WITH src AS ({source}),
        span AS (SELECT {keys}min({x}) AS lo, max({x}) AS hi FROM src {by}),
        cut AS (
            SELECT {keys}lo, CASE WHEN hi - lo + 1 <= {points} THEN hi ELSE hi - {tail} END AS edge,
                   CASE WHEN hi - lo + 1 <= {points} THEN 1
                        ELSE CAST(ceil((hi - {tail} - lo + 1) / {buckets}) AS BIGINT) END AS width
            FROM span
        ),
        old AS (SELECT src.*, (src.{x} - lo) // width AS _bucket FROM src {join}
                WHERE src.{x} <= edge)
        SELECT {keys}min({x}) AS {x}, {low} FROM old GROUP BY {keys}_bucket
        UNION ALL
        SELECT {keys}max({x}) AS {x}, {high} FROM old GROUP BY {keys}_bucket
            HAVING min({x}) < max({x})
        UNION ALL
        SELECT {pick}src.{x}, {plain} FROM src {join} WHERE src.{x} > edge
        ORDER BY {keys}{x}
    """


def bucket_width(versions: int, points: int = MAX_POINTS) -> int:
    """Versions per bucket for a history of ``versions`` (1: drawn as it is)."""
    if versions <= points:
        return 1
    tail, buckets = _shape(points)
    return -(-(versions - tail) // buckets)


def note(versions: int, points: int = MAX_POINTS) -> str:
    """The caption's sentence on downsampling; empty when a chart is drawn as it is."""
    width = bucket_width(versions, points)
    if width <= 1:
        return ""
    tail, _ = _shape(points)
    return (
        f" Downsampled: the newest {tail:,} versions as they are, older ones in buckets of "
        f"{width:,} versions drawn at each bucket's minimum and maximum, so no spike is lost."
    )
