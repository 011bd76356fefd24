"""Health rules over the history database: each gives OK, WARN or ERR with a one-line finding
that quotes the numbers, and a hint that says what to do (``docs/health.md``).

One module per rule, each a class with ``id``, ``title`` and ``check(ctx)``; :data:`RULES`
maps the stable id to it, in the order they are shown. Rules only read the database, through
one read-only connection, so they run beside a collector.

Example::

    findings = evaluate("~/.stateglass/stateglass.duckdb", "/data/checkpoints/orders")
    for f in findings:
        print(f.status, f.rule, f.finding)
    sys.exit({"OK": 0, "WARN": 1, "ERR": 2}[worst(findings)])
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import duckdb

from stateglass.app.analysis.health.base import (
    ERR,
    OK,
    WARN,
    ClockRule,
    Context,
    Facts,
    Finding,
    Rule,
    worst,
)
from stateglass.app.analysis.health.commit_time import CommitTime
from stateglass.app.analysis.health.damaged_files import DamagedFiles
from stateglass.app.analysis.health.falling_behind import FallingBehind
from stateglass.app.analysis.health.holes import Holes
from stateglass.app.analysis.health.late_rows import LateRows
from stateglass.app.analysis.health.memory_per_key import MemoryPerKey
from stateglass.app.analysis.health.orphans import Orphans
from stateglass.app.analysis.health.partition_skew import PartitionSkew
from stateglass.app.analysis.health.restart import Restart, RestartVerdict, context_verdict
from stateglass.app.analysis.health.retention import Retention
from stateglass.app.analysis.health.rocksdb_stalls import RocksdbStalls
from stateglass.app.analysis.health.schema_drift import SchemaDrift
from stateglass.app.analysis.health.snapshot_lag import SnapshotLag
from stateglass.app.analysis.health.stalled_query import StalledQuery
from stateglass.app.analysis.health.state_leak import StateLeak
from stateglass.app.analysis.health.stuck_batch import StuckBatch
from stateglass.app.analysis.health.unbounded_state import UnboundedState
from stateglass.app.analysis.thresholds import HealthConfig
from stateglass.collectors.db.connection import existing_database
from stateglass.collectors.db.read import reader
from stateglass.collectors.db.schema_versions import schema_of
from stateglass.collectors.errors import CheckpointError, NotFound

if TYPE_CHECKING:
    from stateglass.app.analysis.compat.rules import Verdict as CompatVerdict

__all__ = [
    "ERR",
    "OK",
    "RULES",
    "WARN",
    "Finding",
    "HealthConfig",
    "RestartVerdict",
    "Rule",
    "evaluate",
    "evaluate_many",
    "judge",
    "worst",
]

RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        # First: every page and report leads with whether the query restarts.
        Restart(),
        StalledQuery(),
        StuckBatch(),
        UnboundedState(),
        PartitionSkew(),
        SnapshotLag(),
        Retention(),
        Holes(),
        DamagedFiles(),
        Orphans(),
        SchemaDrift(),
        # On Spark's progress events: SKIP (not judged) without a progress source.
        FallingBehind(),
        LateRows(),
        CommitTime(),
        MemoryPerKey(),
        RocksdbStalls(),
        # On the eviction audit.
        StateLeak(),
    )
}
# The rules whose verdict moves with the clock alone between scans (a query stalls, a batch
# gets stuck, a file ages into an orphan): stored verdicts keep their facts instead.
CLOCK_RULES: dict[str, ClockRule] = {
    rule_id: rule for rule_id, rule in RULES.items() if isinstance(rule, ClockRule)
}


# The rules on Spark's progress events, which ``collect --progress`` ingests between scans:
# a stored verdict may predate the newest events, so the Health page judges these fresh.
PROGRESS_RULES: tuple[str, ...] = (
    FallingBehind.id,
    LateRows.id,
    CommitTime.id,
    MemoryPerKey.id,
    RocksdbStalls.id,
)


def evaluate(
    db_path: str,
    checkpoint: str,
    now: datetime | None = None,
    config: HealthConfig | None = None,
) -> list[Finding]:
    """Run every enabled rule on ``checkpoint`` as collected in ``db_path``.

    ``now`` (default: the current time) is what "how long ago" is measured against; a naive
    datetime is taken as UTC. Raises :class:`NotFound` when the checkpoint was never collected.
    """
    from stateglass.collectors.remote import canonical

    root = canonical(checkpoint)
    found = evaluate_many(db_path, [root], now, config)[root]
    if isinstance(found, CheckpointError):
        raise found
    return found


def evaluate_many(
    db_path: str,
    checkpoints: list[str],
    now: datetime | None = None,
    config: HealthConfig | None = None,
    rules: Collection[str] | None = None,
) -> dict[str, list[Finding] | CheckpointError]:
    """:func:`evaluate` for several checkpoints on one connection (the Overview's fleet).

    Opening the database costs about as much as the rules of one small checkpoint, so a page
    of cards opens it once. Keyed by canonical path or URL; a checkpoint never collected maps
    to its :class:`NotFound` rather than failing the others. ``rules``: only these rule ids
    (the stored verdicts' readers judge the clock's rules alone).
    """
    with history(db_path) as conn:
        return evaluate_on(conn, db_path, checkpoints, now, config, rules)


def evaluate_on(
    conn: duckdb.DuckDBPyConnection,
    db_path: str,
    checkpoints: list[str],
    now: datetime | None = None,
    config: HealthConfig | None = None,
    rules: Collection[str] | None = None,
) -> dict[str, list[Finding] | CheckpointError]:
    """:func:`evaluate_many` on a connection :func:`history` opened."""
    from stateglass.collectors.remote import canonical

    out: dict[str, list[Finding] | CheckpointError] = {}
    for checkpoint in checkpoints:
        root = canonical(checkpoint)
        ctx = _context(conn, db_path, root, now, config)
        out[root] = ctx if isinstance(ctx, CheckpointError) else _run_rules(ctx, rules)
    return out


def evaluate_with_facts(
    db_path: str, checkpoint: str, config: HealthConfig | None = None
) -> tuple[list[Finding], dict[str, Facts], datetime, RestartVerdict]:
    """:func:`evaluate` now, with the facts each clock rule judged from (by rule id), the
    moment (naive UTC) from which they hold and the restart verdict: what a watcher stores
    after a scan."""
    from stateglass.collectors.remote import canonical

    with history(db_path) as conn:
        ctx = _context(conn, db_path, canonical(checkpoint), None, config)
        if isinstance(ctx, CheckpointError):
            raise ctx
        facts: dict[str, Facts] = {}
        return _run_rules(ctx, facts=facts), facts, ctx.now, context_verdict(ctx)


def judge(
    db_path: str,
    checkpoint: str,
    now: datetime | None = None,
    config: HealthConfig | None = None,
    compat: CompatVerdict | None = None,
    next_name: str = "",
) -> tuple[RestartVerdict, list[Finding]]:
    """The restart verdict and every enabled rule's findings, as ``stateglass check`` leads
    with them; ``compat``: the prediction for a changed query (``--next``) named ``next_name``.

    Example::

        verdict, findings = judge("~/.stateglass/stateglass.duckdb", "/data/cp/orders")
        print(verdict.verdict, verdict.reason, verdict.way_out)
    """
    from stateglass.collectors.remote import canonical

    root = canonical(checkpoint)
    with history(db_path) as conn:
        ctx = _context(conn, db_path, root, now, config)
        if isinstance(ctx, CheckpointError):
            raise ctx
        ctx.compat, ctx.next_name = compat, next_name
        return context_verdict(ctx), _run_rules(ctx)


def _run_rules(
    ctx: Context, rules: Collection[str] | None = None, facts: dict[str, Facts] | None = None
) -> list[Finding]:
    """The enabled rules' findings (of ``rules`` only, when given); into ``facts``, what each
    clock rule read."""
    findings: list[Finding] = []
    for rule_id, rule in RULES.items():
        if not ctx.config.enabled(rule_id) or (rules is not None and rule_id not in rules):
            continue
        if facts is not None and isinstance(rule, ClockRule):
            facts[rule_id] = rule.facts(ctx)
            findings.extend(rule.at(facts[rule_id], ctx.now, ctx.config))
        else:
            findings.extend(rule.check(ctx))
    return findings


def utc_naive(now: datetime | None) -> datetime:
    """``now`` (default: the current time) as naive UTC, like every timestamp in the database;
    a naive ``now`` is taken as UTC."""
    if now is None:
        now = datetime.now(tz=UTC)
    if now.tzinfo is not None:
        now = now.astimezone(UTC).replace(tzinfo=None)
    return now


@contextmanager
def history(
    db_path: str, conn: duckdb.DuckDBPyConnection | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to a history database of the current schema: ``conn`` (one the
    caller holds open on ``db_path``, e.g. a page's) when given, else one of its own.

    The rules judge from every table, so a database an older StateGlass wrote is refused
    (:class:`~stateglass.collectors.errors.OlderDatabase`) rather than judged from part of its
    facts; the writer upgrades it when it next opens it."""
    db_file = existing_database(db_path)
    if conn is not None:
        schema_of(conn, db_file).require_current()
        yield conn
        return
    with reader(db_file) as opened:
        schema_of(opened, db_file).require_current()
        yield opened


def _context(
    conn: duckdb.DuckDBPyConnection,
    db_path: str,
    root: str,
    now: datetime | None,
    config: HealthConfig | None,
) -> Context | NotFound:
    known = conn.execute("SELECT count(*) FROM checkpoints WHERE checkpoint = ?", [root])
    if known.fetchall()[0][0] == 0:
        db_file = os.path.abspath(os.path.expanduser(db_path))
        why = f"not collected into {db_file}; run `stateglass collect {root}` first"
        return NotFound(root, why)
    return Context(conn, root, utc_naive(now), config or HealthConfig())
