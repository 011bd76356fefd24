"""Health verdicts judged once, when the watcher writes, and read by the Overview and scrapes.

Judging a checkpoint reads its history; judging 500 of them to sort the Overview by health,
or every checkpoint at each Prometheus scrape, re-reads every history each time. So the
watcher judges a checkpoint right after it records a scan (:func:`judge_and_store`) and the
one writer keeps the findings (``health_judged``, ``health_findings``). Readers
(:func:`stored_many`) take them when they still hold:

- they were judged after the checkpoint's last recorded scan (``scan_at = last_scan``), and
- with the same thresholds (``config_key``, a digest of the :class:`HealthConfig`);

otherwise the checkpoint is judged fresh, as before. The rules that read the clock rather
than the history (:data:`CLOCK_RULES`: a query stalls, a batch gets stuck, a file ages into an
orphan without any new scan) are always judged fresh; they read a few rows each.

``stateglass check`` and the Health page judge everything fresh: they answer for one
checkpoint, with the caller's own thresholds and the progress events ingested since.

Example::

    judge_and_store(db, "/data/checkpoints/orders", scan_at)      # the watcher
    stored_many(db.path, ["/data/checkpoints/orders"])            # the Overview, a scrape
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import duckdb

from stateglass.collectors.db import reader
from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.health.base import Finding, worst
from stateglass.collectors.health.config import HealthConfig

if TYPE_CHECKING:
    from stateglass.collectors.db import Database

# Rules whose verdict moves with time alone: never taken from storage.
CLOCK_RULES = frozenset({"stalled_query", "stuck_batch", "orphans"})

Judged = dict[str, list[Finding] | CheckpointError]


def config_key(config: HealthConfig) -> str:
    """A digest of every threshold: verdicts judged with other ones are not reused."""
    return hashlib.sha256(repr(config).encode()).hexdigest()[:16]


def judge_and_store(
    db: Database, root: str, scan_at: datetime, config: HealthConfig | None = None
) -> str | None:
    """Judge ``root`` as the scan at ``scan_at`` left it and store the findings; the worst
    status, or None when it could not be judged (nothing is stored then)."""
    from stateglass.collectors.health import evaluate_many

    config = config or HealthConfig()
    found = evaluate_many(db.path, [root], config=config)[root]
    if isinstance(found, CheckpointError):
        return None
    status = worst(found)
    db.record_verdicts(
        {
            "checkpoint": root,
            "scan_at": scan_at,
            "judged_at": datetime.now(),
            "config_key": config_key(config),
            "worst": status,
        },
        [_row(root, i, f) for i, f in enumerate(found)],
    )
    return status


def _row(root: str, seq: int, f: Finding) -> dict[str, Any]:
    return {"checkpoint": root, "seq": seq, **dataclasses.asdict(f)}


def _read_stored(db_file: str, roots: Sequence[str], key: str) -> dict[str, list[Finding]]:
    """The stored findings of ``roots`` still valid (judged after their last scan, with the
    thresholds ``key``), without the clock's rules."""
    out: dict[str, list[Finding]] = {}
    try:
        with reader(db_file) as conn:
            valid = conn.execute(
                "SELECT j.checkpoint FROM health_judged j JOIN checkpoints c "
                "ON c.checkpoint = j.checkpoint AND c.last_scan = j.scan_at "
                "WHERE j.config_key = ? AND j.checkpoint IN (SELECT unnest(?::VARCHAR[]))",
                [key, list(roots)],
            ).fetchall()
            out = {r: [] for (r,) in valid}
            rows = conn.execute(
                "SELECT checkpoint, rule, title, status, finding, hint, operator_id, "
                "store_name, partition_id FROM health_findings "
                "WHERE checkpoint IN (SELECT unnest(?::VARCHAR[])) ORDER BY checkpoint, seq",
                [list(out)],
            ).fetchall()
    except duckdb.CatalogException:
        return {}  # a database from before stored verdicts: everything is judged fresh
    for root, *fields in rows:
        if fields[0] not in CLOCK_RULES:
            out[root].append(Finding(*fields))
    return out


def stored_many(
    db_path: str,
    checkpoints: Sequence[str],
    now: datetime | None = None,
    config: HealthConfig | None = None,
) -> Judged:
    """Findings per checkpoint as :func:`~collectors.health.evaluate_many` gives them: stored
    ones where they hold (the clock's rules judged now), the others judged fresh."""
    from stateglass.collectors.health import RULES, evaluate_many
    from stateglass.collectors.remote import canonical

    config = config or HealthConfig()
    roots = [canonical(c) for c in checkpoints]
    db_file = os.path.abspath(os.path.expanduser(db_path))
    stored = _read_stored(db_file, roots, config_key(config)) if os.path.isfile(db_file) else {}
    # Called even with nothing to judge: it checks the file and its schema for every reader.
    fresh = evaluate_many(db_path, [r for r in roots if r not in stored], now, config)
    clock = evaluate_many(db_path, list(stored), now, config, rules=CLOCK_RULES)
    order = {rule: i for i, rule in enumerate(RULES)}
    for root, kept in stored.items():
        timed = clock.get(root)
        if isinstance(timed, CheckpointError):
            fresh[root] = timed
            continue
        both = kept + list(timed or [])
        # Rules in their usual order; a rule's own findings keep theirs (the sort is stable).
        fresh[root] = sorted(both, key=lambda f: order.get(f.rule, len(order)))
    return fresh
