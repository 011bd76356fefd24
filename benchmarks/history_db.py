"""The benchmark history database: one store of 200 partitions × 1,000 state versions.

Usage::

    import sys; sys.path.insert(0, "benchmarks")
    from history_db import ensure_history_db, history_checkpoint
    db = ensure_history_db()            # benchmarks/out/history-200x1000.duckdb (cached)
    cp = history_checkpoint()           # the checkpoint path its rows are recorded under

    .venv/bin/python benchmarks/history_db.py [--rebuild]   # build it, print its size

How it is built (a rendering benchmark: the rows are real collector output, tiled):

1. ``benchmarks/out/collect-200x110/checkpoint`` is a real checkpoint written by PySpark
   (``bench_collect.ensure_checkpoint(200, 110)``: ``groupBy(k).agg(count, sum)``, 200
   partitions, HDFS provider, 110 batches; Spark's retention kept batches 9..109 in its logs).
2. It is collected into a fresh DuckDB by a scanner (``stateglass.app.collecting.new_scanner``):
22,000
   ``state_versions`` rows (versions 1..110), 101 ``batches``, 23,600 ``state_files``.
3. That history is extended to versions 1..1,000 and batches 0..999 (well, 9..999) by SQL
   ``INSERT … SELECT`` copies of the real rows with shifted ids:

   * ``state_versions``: version ``v' = v + 110·k`` (k = 1..9, up to 1,000) copies version v
     of the same partition. ``num_keys`` gets a growth trend: ``+ k·(keys at 110 − keys at 1)``
     of that partition, so each partition keeps growing as it did in the real run (to about
     1.9 M keys in all at version 1,000). ``keys_added/updated/removed`` and ``delta_bytes``
     are the real per-batch figures; ``snapshot_bytes`` scales with the keys; ``replay_bytes``
     is the real figure with its base snapshot's share scaled the same way.
   * ``batches``: batch ``b' = 110 + 101·(k−1) + (b − 9)`` copies real batch b (9..109), its
     timestamps shifted by k times the real span (plus one mean trigger interval) so time keeps
     moving forward; the file source's ``logOffset`` follows the new batch id.
   * ``state_files``: one ``N.delta`` per tiled version and partition (the real delta's size)
     and a ``N.snapshot`` where the real version had one, under the real store directory,
     ``purged = true`` (the files are not on disk, as after Spark's maintenance), so an
     incremental ``stateglass collect`` of the checkpoint leaves them alone.

The file is rebuilt when it is missing or when the schema changes (``collectors/db/schema.py``,
``views.py``: a fingerprint of their DDL is kept beside it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
PARTITIONS = 200
REAL_BATCHES = 110
VERSIONS = 1000
DB_FILE = OUT / f"history-{PARTITIONS}x{VERSIONS}.duckdb"
STAMP_FILE = OUT / f"history-{PARTITIONS}x{VERSIONS}.json"

for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)


def history_checkpoint() -> str:
    """The real 200×110 checkpoint (written by ``bench_collect.py`` if missing: ~26 min)."""
    import bench_collect

    cp, _src = bench_collect.ensure_checkpoint(PARTITIONS, REAL_BATCHES)
    return os.path.abspath(cp)


def _fingerprint(checkpoint: str) -> str:
    from stateglass.collectors.db.schema import TABLES
    from stateglass.collectors.db.views import VIEWS

    ddl = "\n".join([*TABLES.values(), *VIEWS.values()])
    text = f"{checkpoint}\n{VERSIONS}\n{ddl}\n{pathlib.Path(__file__).read_text()}"
    return hashlib.sha256(text.encode()).hexdigest()


# Tile k (1..9) of state_versions: copies of versions 1..110, shifted by 110·k.
_TILE_VERSIONS = """
INSERT INTO state_versions BY NAME
WITH ends AS (
    SELECT partition_id,
           max(num_keys) FILTER (WHERE version = $last) - max(num_keys) FILTER (WHERE version = 1)
               AS growth
    FROM state_versions WHERE checkpoint = $cp GROUP BY partition_id
),
real AS (
    SELECT s.*, e.growth AS _growth, base.snapshot_bytes AS _base_snapshot,
           base.num_keys AS _base_keys
    FROM state_versions s JOIN ends e USING (partition_id)
    LEFT JOIN state_versions base
        ON base.checkpoint = s.checkpoint AND base.operator_id = s.operator_id
       AND base.store_name = s.store_name AND base.partition_id = s.partition_id
       AND base.version = s.version - s.versions_since_snapshot
    WHERE s.checkpoint = $cp AND s.version <= $last
),
tiles AS (SELECT range AS _k FROM range(1, $tiles + 1))
-- Every other column (and any the schema gains) is copied as it is.
SELECT * EXCLUDE (_growth, _base_snapshot, _base_keys, _k) REPLACE (
    version + $last * _k AS version,
    num_keys + _k * _growth AS num_keys,
    CAST(snapshot_bytes * (num_keys + _k * _growth) / greatest(num_keys, 1) AS BIGINT)
        AS snapshot_bytes,
    CAST(replay_bytes + coalesce(_base_snapshot, 0) * _k * _growth / greatest(_base_keys, 1)
         AS BIGINT) AS replay_bytes
)
FROM real, tiles
WHERE version + $last * _k <= $versions
"""

# Real batches first..last (the ones Spark's retention kept), copied after the last one.
_TILE_BATCHES = """
INSERT INTO batches BY NAME
WITH span AS (
    SELECT min(batch_id) AS _first, max(batch_id) AS _last,
           max(batch_timestamp_ms) - min(batch_timestamp_ms)
               + (max(batch_timestamp_ms) - min(batch_timestamp_ms))
                 // greatest(count(*) - 1, 1) AS _span_ms
    FROM batches WHERE checkpoint = $cp
),
tiles AS (SELECT range AS _k FROM range(1, $tiles + 1)),
shifted AS (
    SELECT b.*, _last + 1 + (_last - _first + 1) * (_k - 1) + (b.batch_id - _first) AS _id,
           _span_ms * _k AS _shift
    FROM batches b, span, tiles WHERE b.checkpoint = $cp
)
SELECT * EXCLUDE (_id, _shift) REPLACE (
    _id AS batch_id,
    batch_timestamp_ms + _shift AS batch_timestamp_ms,
    CASE WHEN watermark_ms > 0 THEN watermark_ms + _shift ELSE watermark_ms END
        AS watermark_ms,
    offsets_written_at + to_milliseconds(_shift) AS offsets_written_at,
    committed_at + to_milliseconds(_shift) AS committed_at,
    CASE WHEN next_watermark_ms > 0 THEN next_watermark_ms + _shift
         ELSE next_watermark_ms END AS next_watermark_ms,
    regexp_replace(source_offsets, 'logOffset\\\\":[0-9]+',
                   'logOffset\\\\":' || _id::VARCHAR, 'g') AS source_offsets
)
FROM shifted WHERE _id < $versions
"""

_TILE_FILES = """
INSERT INTO state_files BY NAME
WITH tiles AS (SELECT range AS _k FROM range(1, $tiles + 1))
SELECT * EXCLUDE (_k) REPLACE (
    version + $last * _k AS version,
    regexp_replace(path, '/[^/]*$', '') || '/' || (version + $last * _k)::VARCHAR || '.' || kind
        AS path,
    true AS purged,
    first_seen AS purged_at
)
FROM state_files, tiles
WHERE checkpoint = $cp AND version <= $last AND version + $last * _k <= $versions
"""


def _build(checkpoint: str, target: pathlib.Path) -> None:
    import duckdb

    from stateglass.app.collecting import new_scanner

    new_scanner(str(target)).scan(checkpoint)
    params = {
        "cp": checkpoint,
        "last": REAL_BATCHES,
        "tiles": -(-VERSIONS // REAL_BATCHES) - 1,
        "versions": VERSIONS,
    }
    # Tiling writes rows no scan would: straight to the file, the scan's writer closed.
    with duckdb.connect(str(target)) as conn:
        for sql in (_TILE_VERSIONS, _TILE_BATCHES, _TILE_FILES):
            used = {k: v for k, v in params.items() if f"${k}" in sql}
            conn.execute(sql, used)
        (versions, partitions) = conn.execute(
            "SELECT count(DISTINCT version), count(DISTINCT partition_id) FROM state_versions"
        ).fetchone() or (0, 0)
    if (versions, partitions) != (VERSIONS, PARTITIONS):
        raise RuntimeError(f"{target}: tiled {partitions} partitions × {versions} versions")


def ensure_history_db(rebuild: bool = False) -> pathlib.Path:
    """The cached history DB (200 partitions × 1,000 versions); built on first use (~10 s)."""
    checkpoint = history_checkpoint()
    fingerprint = _fingerprint(checkpoint)
    if not rebuild and DB_FILE.is_file() and STAMP_FILE.is_file():
        stamp = json.loads(STAMP_FILE.read_text())
        if stamp.get("fingerprint") == fingerprint:
            return DB_FILE
    OUT.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="history-", dir=OUT) as tmp:
        part = pathlib.Path(tmp) / DB_FILE.name
        _build(checkpoint, part)
        os.replace(part, DB_FILE)
    STAMP_FILE.write_text(
        json.dumps(
            {
                "fingerprint": fingerprint,
                "checkpoint": checkpoint,
                "built_in_s": round(time.perf_counter() - start, 1),
            }
        )
    )
    return DB_FILE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rebuild", action="store_true", help="build it again even if cached")
    args = ap.parse_args()
    start = time.perf_counter()
    path = ensure_history_db(rebuild=args.rebuild)
    from stateglass.collectors.db.read import read_query

    counts = {
        table: read_query(str(path), f"SELECT count(*) FROM {table}")[0][0]
        for table in ("batches", "state_versions", "state_files")
    }
    print(
        f"{path}: {path.stat().st_size / 2**20:.1f} MiB, {counts} "
        f"({time.perf_counter() - start:.1f} s)"
    )


if __name__ == "__main__":
    main()
