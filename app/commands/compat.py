"""``stateglass compat OLD NEW``: would the changed query restart on OLD's state?

NEW is a checkpoint of the changed query run on a fresh checkpoint (one batch in staging or
CI). The prediction follows the rules of the Spark version that wrote NEW (docs/compat.md).

Examples::

    stateglass compat /data/checkpoints/orders /tmp/orders-staging
    stateglass compat /data/checkpoints/orders /tmp/orders-staging --json

Exit status: 0 Spark would restart; 1 Spark would refuse (its error class is printed);
2 bad input (one line naming the path).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Imported by `run`: the CLI imports this module to build its parser, for every command.
    from stateglass.app.analysis.compat.facts import CheckpointFacts, OperatorFacts
    from stateglass.app.analysis.compat.rules import Verdict

EXIT_RESTARTS = 0
EXIT_REFUSED = 1

# stateglass.app.analysis.compat.rules' statuses (SAME, COMPATIBLE, ...) -> the label printed.
_LABEL = {
    "same": "same",
    "compatible": "ok",
    "new": "new",
    "note": "note",
    "caveat": "caveat",
    "refuse": "REFUSE",
}


def add_parser(subparsers: Any) -> None:
    """Register ``compat`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "compat",
        help="predict whether a changed query restarts on an old checkpoint; exit 0/1",
        description="Compare OLD (the production checkpoint) with NEW (the changed query run on "
        "a fresh checkpoint) the way Spark does on a restart. Exit status: 0 Spark would "
        "restart, 1 it would refuse (its error class is printed), 2 bad input.",
    )
    p.add_argument("old", metavar="OLD_CHECKPOINT", help="the checkpoint the query restarts on")
    p.add_argument(
        "new",
        metavar="NEW_CHECKPOINT",
        help="a fresh checkpoint written by the changed query (one batch is enough)",
    )
    p.add_argument("--json", action="store_true", help="print JSON (for CI) instead of text")


def run(args: argparse.Namespace) -> int:
    from stateglass.app.analysis.compat import compare

    old, new, verdict = compare(args.old, args.new)
    if args.json:
        print(json.dumps(to_json(old, new, verdict), indent=2))
    else:
        print(render_text(old, new, verdict))
    return EXIT_RESTARTS if verdict.restarts else EXIT_REFUSED


def to_json(old: CheckpointFacts, new: CheckpointFacts, verdict: Verdict) -> dict[str, Any]:
    return {
        "old": old.root,
        "new": new.root,
        "spark_rules": verdict.spark_rules,
        "restarts": verdict.restarts,
        "error_class": verdict.error_class,
        "refusals": [c.to_json() for c in verdict.refusals],
        "checks": [c.to_json() for c in verdict.checks],
        "operators": {
            "old": [_op_json(o) for o in old.operators],
            "new": [_op_json(o) for o in new.operators],
        },
    }


def _op_json(op: OperatorFacts) -> dict[str, Any]:
    return {
        "operator_id": op.operator_id,
        "name": op.name,
        "metadata_version": op.metadata_version,
        "stores": [
            {
                "name": s.name,
                "num_partitions": s.num_partitions,
                "provider": s.provider,
                "schema_format": s.current.format_version if s.current else None,
                "schema_files": len(s.schemas),
            }
            for s in op.stores
        ],
    }


def _describe(op: OperatorFacts) -> str:
    meta = f"operator metadata v{op.metadata_version}" if op.metadata_version else "no metadata"
    stores = "; ".join(
        f"{s.name} ({s.provider}, {s.num_partitions} partitions, "
        f"schema v{s.current.format_version if s.current else '-'}"
        f"{f' x{len(s.schemas)} files' if len(s.schemas) > 1 else ''})"
        for s in op.stores
    )
    return f"operator {op.operator_id} {op.name} [{meta}]: {stores}"


def _kind(error: str) -> str:
    """Spark's error classes are upper case; without one, Spark raises a plain exception."""
    return "error class" if error.replace("_", "").replace(".", "").isupper() else "exception"


def render_text(old: CheckpointFacts, new: CheckpointFacts, verdict: Verdict) -> str:
    lines = [
        f"OLD  {old.root}  (last committed batch {old.last_committed_batch}, "
        f"{len(old.operators)} stateful operator(s))",
        f"NEW  {new.root}  ({len(new.operators)} stateful operator(s))",
        f"rules of Spark {verdict.spark_rules} (the version that wrote NEW)",
        "",
    ]
    for label, facts in (("OLD", old), ("NEW", new)):
        lines.extend(f"{label}  {_describe(op)}" for op in facts.operators)
    lines.append("")
    for check in verdict.checks:
        lines.append(f"  {_LABEL[check.status]:<7} {check.subject}: {check.message}")
        if check.error_class:
            lines.append(f"          {_kind(check.error_class)} {check.error_class}")
        lines.extend(f"          {d}" for d in check.details)
    lines.append("")
    if verdict.restarts:
        lines.append("verdict: Spark would restart the changed query on OLD's state")
    else:
        more = len(verdict.refusals) - 1
        tail = f" ({more} more refusal(s) behind it)" if more > 0 else ""
        error = verdict.error_class or "?"
        lines.append(f"verdict: Spark would refuse with {_kind(error)} {error}{tail}")
    return "\n".join(lines)
