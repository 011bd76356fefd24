"""The Markdown summary: what to paste into a ticket (verdicts, key numbers, operators).

Example::

    from stateglass.app.report.markdown import render
    from stateglass.app.report.model import load_report
    print(render(load_report(db, "/data/checkpoints/orders")))
"""

from __future__ import annotations

from stateglass.app.escape import md, md_code
from stateglass.app.report.model import (
    ReportData,
    finding_groups,
    finding_scope,
    fmt_int,
)
from stateglass.parsers.units import UNKNOWN, fmt_bytes

STATUS_ICON = {"OK": "OK", "WARN": "WARN ⚠", "ERR": "ERR ✖", "SKIP": "not judged"}


def cell(value: object) -> str:
    """Text as a table cell: Markdown and HTML escaped (pipes too), newlines folded.

    Everything from a checkpoint goes through here (or ``md``): a directory named
    ``[x](https:evil)`` or ``<img src=x onerror=…>`` stays text in the rendered report.
    """
    return md("" if value is None else value)


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    """A GFM table of plain-text cells (each escaped here)."""
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def render(data: ReportData) -> str:
    """The summary as GitHub-flavoured Markdown."""
    out = [
        f"# StateGlass report: {md(data.name)} — {md(data.verdict)}",
        "",
        f"Checkpoint {md(data.checkpoint)}, query id {md(data.query_id)}.  ",
        f"Generated {data.generated_at:%Y-%m-%d %H:%M:%S} UTC"
        + (f", last collected {data.last_scan:%Y-%m-%d %H:%M:%S} UTC" if data.last_scan else "")
        + (f"; {md(data.as_of_note)}." if data.as_of_note else "."),
    ]
    out += _health(data)
    out += ["", "## Key numbers", ""]
    out += _table(["", ""], [[k, v] for k, v in data.numbers])
    out += _operators(data)
    out += _forensics(data)
    if not data.problems.empty:
        out += ["", f"## Problems ({len(data.problems)} unreadable files)", ""]
        out += _table(
            ["file", "error", "message"],
            [[r.path, r.kind, r.message] for r in data.problems.itertuples()],
        )
    out += [
        "",
        "_Made by StateGlass; charts are in the HTML report (`stateglass report -o r.html`)._",
    ]
    return "\n".join(out) + "\n"


def _health(data: ReportData) -> list[str]:
    """The verdict, one row per finding (a long group folded), and what to do."""
    out = ["", f"## Health: {md(data.verdict)} ({md(data.summary)})", ""]
    if not data.findings:
        return [*out, "No health findings."]
    rows: list[list[object]] = []
    hints: dict[str, str] = {}
    for group in finding_groups(data.findings):
        for f in group.shown:
            rows.append([STATUS_ICON.get(f.status, f.status), f.title, finding_scope(f), f.finding])
        if group.folded:
            first = group.folded[0]
            rows.append(
                [
                    STATUS_ICON.get(first.status, first.status),
                    first.title,
                    f"{len(group.folded)} more",
                    "… like the rows above (all of them are in the HTML report)",
                ]
            )
        for f in group.shown:
            if f.status not in ("OK", "SKIP") and f.hint:
                hints.setdefault(f"**{md(f.title)}**: {md(f.hint)}", f.rule)
    out += _table(["status", "check", "where", "finding"], rows)
    if hints:
        out += ["", "What to do:", ""]
        out += [f"* {hint}" for hint in hints]
    return out


OPERATOR_COLUMNS = [
    "operator",
    "name",
    "store",
    "provider",
    "partitions",
    "versions",
    "keys",
    "on disk",
    "skew",
]


def _operators(data: ReportData) -> list[str]:
    """One row per store, where each store's history starts, and the schemas."""
    out = ["", "## Operators", ""]
    if not data.stores:
        return [*out, "No stateful operator."]
    rows: list[list[object]] = []
    for s in data.stores:
        span = s.version_range
        skew = s.skew_now
        rows.append(
            [
                s.operator_id,
                s.operator_name,
                s.store_name,
                s.provider,
                fmt_int(s.num_partitions),
                "none" if span is None else f"{span[0]}..{span[1]}",
                fmt_int(s.keys_now),
                fmt_bytes(s.bytes_on_disk),
                UNKNOWN if skew is None else f"{skew:.2f}×",
            ]
        )
    out += _table(OPERATOR_COLUMNS, rows)
    # Where each store's history starts, and why: a partial history is said, not hidden.
    out += [""] + [f"* {md(s.label)}: {md(s.history_note)}" for s in data.stores]
    # transformWithState: the keys above are raw RocksDB keys; these are the rows.
    out += [
        f"* {md(s.label)}: rows as Spark's reader returns them: {md(s.rows_line)} (the keys "
        "above are raw RocksDB keys of every column family)"
        for s in data.stores
        if s.rows_line
    ]
    # Types as code spans: literal in Markdown, and a field name's ":" or "<" reads as itself.
    out += ["", "Schemas:", ""]
    for s in data.stores:
        store = f"{s.operator_id} {md(s.store_name)}"
        if s.variables:
            out += [
                f"* {store} / {md(var.label)}: "
                + ", ".join(f"{name} {md_code(type_)}" for name, type_ in var.all_columns)
                for var in s.variables
            ]
        else:
            note = f" ({md(s.variables_note)})" if s.variables_note else ""
            out.append(
                f"* {store}: key {md_code(s.key_schema)}, value {md_code(s.value_schema)}{note}"
            )
    return out


# ---- growth attribution and restart cost ---------------------------------------------------


def _forensics(data: ReportData) -> list[str]:
    """Per store: who brings the new keys, and what a restart loads (now and what-if)."""
    stores = [s for s in data.stores if s.forensics is not None]
    if not stores:
        return []
    out = ["", "## Growth and restart cost", ""]
    for s in stores:
        f = s.forensics
        assert f is not None
        out += [f"### {md(s.label)}", ""]
        if f.growth is None:
            out += [md(f.growth_note), ""]
        else:
            g = f.growth
            out += [md(g.sentence()) + ".", ""]
            if g.contributors:
                out += _table(
                    ["key field", "value", "new keys", "share of new keys", "of all keys now"],
                    [
                        [
                            c.field,
                            c.value,
                            fmt_int(c.keys),
                            f"{c.share:.1%}",
                            f"{c.share_of_all:.1%}",
                        ]
                        for c in g.contributors
                    ],
                )
                out += [
                    "",
                    f"New keys: in the store at version {g.newest}, not at version {g.base}."
                    + (" " + md(g.share_note()) if g.share_sample else ""),
                    "",
                ]
        out += _table(["restart", "cost"], [[k, v] for k, v in f.restart_lines()])
        out.append("")
    return out
