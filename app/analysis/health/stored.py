"""Health verdicts judged once, when the watcher writes, and read by the Overview and scrapes.

Judging a checkpoint reads its history; judging 500 of them to sort the Overview by health,
or every checkpoint at each Prometheus scrape, re-reads every history each time. So the
watcher judges a checkpoint right after it records a scan (:func:`judge_and_store`) and the
one writer keeps the findings (``health_judged``, ``health_findings``). Readers
(:func:`stored_many`) take them when they still hold:

- they were judged after the checkpoint's last recorded scan (``scan_at = last_scan``), and
- with the same thresholds (``config_key``, a digest of the :class:`HealthConfig`);

otherwise the checkpoint is judged fresh, as before. The rules that read the clock as well as
the history (:data:`~app.analysis.health.CLOCK_RULES`: a query stalls, a batch gets stuck, a
file ages into an orphan, all without a new scan) are never taken from storage: the watcher
stores what each of them read of the history (``clock_facts``: the last commit, the running
batch, the candidate orphans by age), and a reader applies its own clock to those facts,
which gives the findings judging the whole history at that moment gives, for the price of a
JSON parse. Facts hold from the moment they were read (``as_of``) until the next scan; a
reader asking about an earlier moment, or a row stored without them, judges those rules fresh.

The watcher also stores the restart verdict (``clock_facts``' ``restart``: it reads only what
a scan writes), so the Health page (:func:`judge_stored`) answers for one checkpoint without
reading a month of logs and files again. It judges fresh the rules on Spark's progress events
(:data:`~app.analysis.health.PROGRESS_RULES`: ``collect --progress`` ingests those between scans),
so it shows what judging everything fresh shows. ``stateglass check`` judges everything fresh.

Example::

    Scanner(db, reconcile=policy, after_write=storing_verdicts(config))   # the watcher
    judge_and_store(db, "/data/checkpoints/orders", scan_at)      # what it runs after a scan
    stored_many(db.path, ["/data/checkpoints/orders"])            # the Overview, a scrape
    verdict, findings = judge_stored(db.path, "/data/checkpoints/orders")  # the Health page
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from stateglass.app.analysis.health.base import Facts, Finding, worst
from stateglass.app.analysis.thresholds import HealthConfig
from stateglass.collectors.errors import CheckpointError, CollectorError

if TYPE_CHECKING:
    import duckdb

    from stateglass.collectors.db.writer import Database
    from stateglass.collectors.scan.scanner import AfterWrite

Judged = dict[str, list[Finding] | CheckpointError]


def config_key(config: HealthConfig) -> str:
    """A digest of every threshold: verdicts judged with other ones are not reused."""
    return hashlib.sha256(repr(config).encode()).hexdigest()[:16]


def judge_and_store(
    db: Database, root: str, scan_at: datetime, config: HealthConfig | None = None
) -> str | None:
    """Judge ``root`` as the scan at ``scan_at`` left it and store the findings with the
    clock rules' facts; the worst status, or None when it could not be judged (nothing is
    stored then)."""
    from stateglass.app.analysis.health import evaluate_with_facts

    config = config or HealthConfig()
    try:
        found, facts, as_of, verdict = evaluate_with_facts(db.path, root, config)
    except CheckpointError:
        return None
    status = worst(found)
    db.record_verdicts(
        {
            "checkpoint": root,
            "scan_at": scan_at,
            "judged_at": as_of,
            "config_key": config_key(config),
            "worst": status,
            "clock_facts": json.dumps(
                {"as_of": as_of.isoformat(), "rules": facts, "restart": verdict.to_json()}
            ),
        },
        [_row(root, i, f) for i, f in enumerate(found)],
    )
    return status


def storing_verdicts(config: HealthConfig | None = None) -> AfterWrite:
    """A watcher's scanner's hook (``after_write``): judge the checkpoint just scanned with
    ``config``'s thresholds and store the verdicts (:func:`judge_and_store`)."""

    def store(db: Database, root: str, scan_at: datetime) -> None:
        import duckdb

        # A rule that trips on the history must not stop the watcher: what cannot be judged
        # stores nothing, and readers then find the stored verdicts older than the scan and
        # judge fresh.
        with contextlib.suppress(CollectorError, duckdb.Error):
            judge_and_store(db, root, scan_at, config)

    return store


def _row(root: str, seq: int, f: Finding) -> dict[str, Any]:
    return {"checkpoint": root, "seq": seq, **dataclasses.asdict(f)}


# A stored verdict: its findings apart from the clock rules', and their facts (None: judge
# the clock rules fresh).
Kept = tuple[list[Finding], Mapping[str, Facts] | None]


def _read_stored(
    conn: duckdb.DuckDBPyConnection,
    roots: Sequence[str],
    config: HealthConfig,
    now: datetime,
) -> dict[str, Kept]:
    """The stored verdicts of ``roots`` still valid (judged after their last scan, with
    ``config``'s thresholds), without the clock rules' findings."""
    from stateglass.app.analysis.health import CLOCK_RULES

    valid = conn.execute(
        "SELECT j.checkpoint, j.clock_facts FROM health_judged j JOIN checkpoints c "
        "ON c.checkpoint = j.checkpoint AND c.last_scan = j.scan_at "
        "WHERE j.config_key = ? AND j.checkpoint IN (SELECT unnest(?::VARCHAR[]))",
        [config_key(config), list(roots)],
    ).fetchall()
    out: dict[str, Kept] = {r: ([], _usable(facts, config, now)) for r, facts in valid}
    rows = conn.execute(
        "SELECT checkpoint, rule, title, status, finding, hint, operator_id, "
        "store_name, partition_id FROM health_findings "
        "WHERE checkpoint IN (SELECT unnest(?::VARCHAR[])) ORDER BY checkpoint, seq",
        [list(out)],
    ).fetchall()
    for root, *fields in rows:
        if fields[0] not in CLOCK_RULES:
            out[root][0].append(Finding(*fields))
    return out


def _usable(stored: str | None, config: HealthConfig, now: datetime) -> Mapping[str, Facts] | None:
    """The clock rules' stored facts when they answer for ``now``: read at or before it, one
    for every clock rule ``config`` enables."""
    from stateglass.app.analysis.health import CLOCK_RULES

    if stored is None:
        return None
    facts = json.loads(stored)
    if now < datetime.fromisoformat(facts["as_of"]):
        return None
    rules: dict[str, Facts] = facts["rules"]
    enabled = [r for r in CLOCK_RULES if config.enabled(r)]
    return rules if all(r in rules for r in enabled) else None


def _at(facts: Mapping[str, Facts], now: datetime, config: HealthConfig) -> list[Finding]:
    """The clock rules' findings at ``now`` from their stored facts."""
    from stateglass.app.analysis.health import CLOCK_RULES

    found: list[Finding] = []
    for rule_id, rule in CLOCK_RULES.items():
        if config.enabled(rule_id):
            found.extend(rule.at(facts[rule_id], now, config))
    return found


def stored_many(
    db_path: str,
    checkpoints: Sequence[str],
    now: datetime | None = None,
    config: HealthConfig | None = None,
    conn: duckdb.DuckDBPyConnection | None = None,
) -> Judged:
    """Findings per checkpoint as :func:`~app.analysis.health.evaluate_many` gives them: stored
    ones where they hold (the clock's rules applied to their facts at ``now``), the others
    judged fresh; all on one read-only connection (``conn``, the caller's, when given)."""
    from stateglass.app.analysis.health import CLOCK_RULES, RULES, evaluate_on, history, utc_naive
    from stateglass.collectors.remote import canonical

    config = config or HealthConfig()
    roots = [canonical(c) for c in checkpoints]
    moment = utc_naive(now)
    # Opened even with nothing to judge: it checks the file and its schema for every reader.
    with history(db_path, conn) as read:
        stored = _read_stored(read, roots, config, moment)
        fresh = evaluate_on(read, db_path, [r for r in roots if r not in stored], moment, config)
        unheld = [r for r, (_, facts) in stored.items() if facts is None]
        clock = evaluate_on(read, db_path, unheld, moment, config, rules=CLOCK_RULES)
    order = {rule: i for i, rule in enumerate(RULES)}
    for root, (kept, facts) in stored.items():
        timed = clock.get(root) if facts is None else _at(facts, moment, config)
        if isinstance(timed, CheckpointError):
            fresh[root] = timed
            continue
        both = kept + list(timed or [])
        # Rules in their usual order; a rule's own findings keep theirs (the sort is stable).
        fresh[root] = sorted(both, key=lambda f: order.get(f.rule, len(order)))
    return fresh


def judge_stored(
    db_path: str,
    checkpoint: str,
    now: datetime | None = None,
    config: HealthConfig | None = None,
) -> tuple[dict[str, Any], list[Finding]]:
    """:func:`~app.analysis.health.judge` for one checkpoint, the verdict as its ``to_json()``:
    from the stored verdict while it holds (the progress rules judged fresh, the clock's
    rules applied to their facts at ``now``), else everything judged fresh."""
    from stateglass.app.analysis.health import history, judge, utc_naive
    from stateglass.collectors.remote import canonical

    config = config or HealthConfig()
    root = canonical(checkpoint)
    moment = utc_naive(now)
    with history(db_path) as conn:
        restart = _stored_restart(conn, root, config)
        kept = _read_stored(conn, [root], config, moment).get(root) if restart else None
        if restart is not None and kept is not None:
            found = _with_fresh(conn, db_path, root, kept, moment, config)
            if found is not None:
                return restart, found
    verdict, fresh = judge(db_path, root, now, config)
    return verdict.to_json(), fresh


def _stored_restart(
    conn: duckdb.DuckDBPyConnection, root: str, config: HealthConfig
) -> dict[str, Any] | None:
    """The restart verdict stored with ``root``'s findings while they hold (None: a watcher
    of an older StateGlass stored none)."""
    rows = conn.execute(
        "SELECT j.clock_facts FROM health_judged j JOIN checkpoints c "
        "ON c.checkpoint = j.checkpoint AND c.last_scan = j.scan_at "
        "WHERE j.config_key = ? AND j.checkpoint = ?",
        [config_key(config), root],
    ).fetchall()
    if not rows or rows[0][0] is None:
        return None
    found: dict[str, Any] | None = json.loads(rows[0][0]).get("restart")
    return found


def _with_fresh(
    conn: duckdb.DuckDBPyConnection,
    db_path: str,
    root: str,
    kept: Kept,
    now: datetime,
    config: HealthConfig,
) -> list[Finding] | None:
    """``kept`` with the progress rules judged now (and the clock's, without their facts), in
    the rules' order; None when ``root`` cannot be judged."""
    from stateglass.app.analysis.health import CLOCK_RULES, PROGRESS_RULES, RULES, evaluate_on

    stored, facts = kept
    rules = set(PROGRESS_RULES) | (set() if facts is not None else set(CLOCK_RULES))
    fresh = evaluate_on(conn, db_path, [root], now, config, rules=rules)[root]
    if isinstance(fresh, CheckpointError):
        return None
    timed = _at(facts, now, config) if facts is not None else []
    both = [f for f in stored if f.rule not in PROGRESS_RULES] + timed + fresh
    order = {rule: i for i, rule in enumerate(RULES)}
    # Rules in their usual order; a rule's own findings keep theirs (the sort is stable).
    return sorted(both, key=lambda f: order.get(f.rule, len(order)))
