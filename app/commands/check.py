"""``stateglass check``: the health rules as a table, and an exit status a deploy can gate on.

Examples::

    stateglass check /data/checkpoints/orders                  # collect, then judge
    stateglass check /data/checkpoints/orders --no-collect --db ./sg.duckdb
    stateglass check /data/checkpoints/orders --config health.toml --json

The output leads with one restart verdict (``restarts``, ``restarts after repair``, ``will not
restart``, or ``state not judged`` when no store could be read), its reason and evidence, and
the way out when it will not restart. The verdict is the first rule (``restart``: OK, WARN,
ERR), so the exit status follows it: 0 when every rule is OK, 1 when the worst is WARN
(restarts after repair, state not judged, or a warning), 2 when it is ERR (will not
restart, or another rule's error). A rule that could not judge (``SKIP``: no progress events
without ``--progress``, or a stall on a checkpoint whose file times look copied, which no
query writes to) is counted apart as "not judged" and never raises the exit status. An error
(not a checkpoint, a bad config file, …) also exits 2 with one line on stderr: a gate treats
both as "stop".

    stateglass check /data/checkpoints/orders --next /tmp/orders-staging   # a changed query

Without ``--db`` the history is collected into a temporary database, removed when ``check``
ends: a gate that runs on every deploy leaves nothing behind. ``--db PATH`` keeps it there (the
next ``check`` then collects only what is new); ``--no-collect`` without ``--db`` reads the
default history database (``~/.stateglass/stateglass.duckdb``) as ``collect`` left it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from typing import TYPE_CHECKING, Any

from stateglass.app.args import utc_time
from stateglass.collectors.locations import DEFAULT_DB

if TYPE_CHECKING:
    from stateglass.app.analysis.health import Finding, RestartVerdict
    from stateglass.app.settings import Settings

EXIT_STATUS = {"OK": 0, "WARN": 1, "ERR": 2}


def add_parser(subparsers: Any) -> None:
    """Register ``check`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "check",
        help="judge a checkpoint with the health rules; exit 0/1/2 for OK/WARN/ERR",
        description="Collect the checkpoint (incrementally) and run the health rules on its "
        "history. Exit status: 0 OK, 1 WARN, 2 ERR; errors also exit 2. Rules that could not "
        "judge (SKIP) are counted as not judged and do not change the exit status.",
    )
    p.add_argument("checkpoint", help="checkpoint directory (the query's checkpointLocation)")
    p.add_argument(
        "--db",
        default=None,
        metavar="PATH",
        help="keep the history in this DuckDB database (default: a temporary one, removed on "
        f"exit; with --no-collect, {DEFAULT_DB})",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="TOML file with rule thresholds (docs/health.md); default: the documented defaults",
    )
    p.add_argument(
        "--collect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="collect the checkpoint into the database first (default); --no-collect judges "
        "the history as it is",
    )
    p.add_argument(
        "--now",
        default=None,
        metavar="TIME",
        help="judge as of this ISO-8601 time (UTC unless it says otherwise); default: now",
    )
    p.add_argument(
        "--next",
        default=None,
        metavar="NEW",
        help="a fresh checkpoint of the changed query (as for `stateglass compat`): the verdict "
        "also says whether Spark accepts the change",
    )
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="also print each rule's title and the hints"
    )


def _collect(checkpoint: str, db_path: str, settings: Settings) -> str:
    """Scan ``checkpoint`` into the database (incremental, a progress bar only on a terminal)."""
    from stateglass.app.collecting import ProgressBar, new_scanner
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint

    root = Checkpoint.open(checkpoint).root  # not a checkpoint: one line, exit 2
    # Collecting creates and writes the database: never inside a checkpoint.
    refuse_inside_checkpoint(db_path, "--db", [root])
    new_scanner(db_path, settings).scan(root, ProgressBar(root))
    return root


def table(findings: list[Finding], verbose: bool = False, variable_rows: str = "") -> str:
    """Fixed-width rows: status, rule, where, finding; the hint under each WARN/ERR row;
    ``variable_rows`` (transformWithState rows per state variable) under unbounded_state's."""
    head = ("STATUS", "RULE", "WHERE", "FINDING")
    rows = [(f.status, f.rule, f.where or "-", f.finding) for f in findings]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    lines = []
    for i, row in enumerate([head, *rows]):
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
        )
        if i == 0:
            continue
        f = findings[i - 1]
        indent = " " * (widths[0] + 2)
        if verbose:
            lines.append(f"{indent}({f.title})")
        if variable_rows and f.rule == "unbounded_state":
            lines.append(f"{indent}rows per state variable: {variable_rows}")
        if f.hint and (verbose or f.status != "OK"):
            lines.append(f"{indent}hint: {f.hint}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """``stateglass check``: exit 0, 1 or 2 for a worst status of OK, WARN or ERR."""
    from stateglass.app.settings import settings_of
    from stateglass.collectors import limits

    settings = settings_of(args)  # a bad file fails before anything is collected
    limits.configure(settings.health.limits.over(limits.from_env()))
    try:
        if args.db is not None or not args.collect:
            db = os.path.abspath(os.path.expanduser(args.db or DEFAULT_DB))
            return _run(args, settings, db)
        with tempfile.TemporaryDirectory(prefix="stateglass-check-") as tmp:
            return _run(args, settings, os.path.join(tmp, "history.duckdb"))
    finally:
        limits.configure(None)


def _run(args: argparse.Namespace, settings: Settings, db_path: str) -> int:
    from stateglass.app.analysis.health import judge, worst
    from stateglass.collectors.remote import canonical

    now = None if args.now is None else utc_time(args.now, "--now")
    if args.collect:
        root = _collect(args.checkpoint, db_path, settings)
    else:
        root = canonical(args.checkpoint)
    config = settings.health
    compat = None
    if args.next is not None:
        from stateglass.app.analysis.compat import compare

        compat = compare(root, args.next)[2]
    verdict, findings = judge(db_path, root, now, config, compat, args.next or "")
    status = worst(findings)
    if args.json:
        doc = {
            "checkpoint": root,
            "status": status,
            "restart": verdict.to_json(),
            "findings": [_finding_json(f) for f in findings],
        }
        print(json.dumps(doc, indent=2))
    else:
        kept = db_path if args.db is not None or not args.collect else "temporary"
        print(f"{root}  (history: {kept})")
        print(render_verdict(verdict))
        print(table(findings, args.verbose, _variable_rows(db_path, root)))
        print(counts(findings))
        print(f"worst: {status} (exit {EXIT_STATUS[status]})")
    sys.stdout.flush()
    return EXIT_STATUS[status]


def _variable_rows(db_path: str, root: str) -> str:
    """The checkpoint's transformWithState rows per state variable ("" without, or on a
    database older than the ``variable_rows`` table)."""
    from stateglass.app.queries.variables import rows_lines
    from stateglass.collectors.db.read import reader
    from stateglass.collectors.db.schema_versions import schema_of

    with reader(db_path) as conn:
        if schema_of(conn, db_path).lacks("variable_rows"):
            return ""
    return rows_lines(db_path, (root,)).get(root, "")


def counts(findings: list[Finding]) -> str:
    """``rules: 12 OK, 0 WARN, 0 ERR, 6 not judged``: findings by status, not judged apart."""
    n = {s: sum(f.status == s for f in findings) for s in ("OK", "WARN", "ERR", "SKIP")}
    return f"rules: {n['OK']} OK, {n['WARN']} WARN, {n['ERR']} ERR, {n['SKIP']} not judged"


def render_verdict(verdict: RestartVerdict) -> str:
    """The verdict block that leads the output: verdict, reason, evidence, way out."""
    lines = [f"RESTART: {verdict.verdict.upper()} - {verdict.reason}"]
    if verdict.error_class:
        lines.append(f"  Spark: {verdict.error_class}")
    lines += [f"  evidence: {e}" for e in verdict.evidence]
    way = verdict.way_out
    if way is not None:
        where = f"restart at batch {way.batch}" if way.batch is not None else "no whole batch"
        lines.append(f"  way out ({where}): {way.steps}")
        lines += [f"    move aside: {p}" for p in way.move_aside]
        if way.lost:
            lines.append(f"  lost: {way.lost}")
    return "\n".join(lines) + "\n"


def _finding_json(f: Finding) -> dict[str, Any]:
    return dataclasses.asdict(f)
