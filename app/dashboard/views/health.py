"""Health: every rule's verdict for one checkpoint, and the report to hand on."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from stateglass.app import queries
from stateglass.app.dashboard import context, sql_link, url_state
from stateglass.app.dashboard.views import fix_panel
from stateglass.app.escape import md, md_code

if TYPE_CHECKING:
    from stateglass.collectors.checkpoints.checkpoint import StoreInfo

# Plain words and a cell colour: emoji need a font that headless browsers may not have.
STATUS_COLORS = {"OK": "#d9f2d9", "WARN": "#ffe8cc", "ERR": "#ffd6d6", "SKIP": "#eceff3"}


@st.cache_data(ttl=60, max_entries=64, show_spinner="Checking the health rules…")
def _findings(
    db: str, data_version: str, checkpoint: str, config: str | None
) -> tuple[dict[str, Any], pd.DataFrame]:
    # ``config`` (the --config path) is part of the cache key: other thresholds, other verdicts.
    # The verdicts the watcher stored after the last scan, where they hold: judging a month's
    # history afresh reads every log entry and state file again.
    from stateglass.app.analysis.health.stored import judge_stored

    verdict, found = judge_stored(db, checkpoint, config=context.health_config())
    rows = [
        {
            "status": f.status,
            "rule": f.title,
            "where": _where(f),
            "finding": f.finding,
            "what to do": f.hint if f.status in ("WARN", "ERR") else "",
            "evidence": _evidence(checkpoint, f),
            "rule_id": str(f.rule),
            "operator_id": getattr(f, "operator_id", None),
            "store_name": getattr(f, "store_name", None),
        }
        for f in found
    ]
    return verdict, pd.DataFrame(rows)


def _verdict(checkpoint: str, verdict: dict[str, Any]) -> None:
    """The restart verdict leads the page, as it leads ``stateglass check``."""
    show = {
        "restarts": st.success,
        "restarts after repair": st.warning,
        "state not judged": st.warning,
    }.get(verdict["verdict"], st.error)
    lines = [f"**Restart: {md(verdict['verdict'])}** — {md(verdict['reason'])}"]
    if verdict["error_class"]:
        lines.append(f"Spark: {md_code(verdict['error_class'])}")
    lines += [f"- {md(e)}" for e in verdict["evidence"]]
    way = verdict["way_out"]
    if way:
        lines.append(f"*Way out:* {md(way['steps'])}")
        if way["lost"]:
            lines.append(f"*Lost:* {md(way['lost'])}")
    show("  \n".join(lines))
    if way and way["move_aside"]:
        with st.expander(f"Entries to move aside ({len(way['move_aside'])})"):
            st.code("\n".join(way["move_aside"]), language=None)
    if verdict["verdict"] == "will not restart" and way and way["restart_at_batch"] is not None:
        from stateglass.app.fixes import restart_fix

        fix_panel.render(restart_fix(checkpoint, int(way["restart_at_batch"])))


# The page and State tab that show what a rule read: a finding links there.
EVIDENCE = {
    "unbounded_state": ("state", "Size"),
    "partition_skew": ("state", "Spread"),
    "snapshot_lag": ("state", "Restart"),
    "state_leak": ("state", "Eviction"),
    "commit_time": ("state", "Spark's metrics"),
    "memory_per_key": ("state", "Spark's metrics"),
    "rocksdb_stalls": ("state", "Spark's metrics"),
    "stalled_query": ("query", None),
    "stuck_batch": ("query", None),
    "falling_behind": ("query", None),
    "late_rows": ("query", None),
    "damaged_files": ("query", None),
}


def _evidence(checkpoint: str, f: Any) -> str:
    """A link to the chart or rows behind a finding ("" when no page shows them)."""
    page, tab = EVIDENCE.get(str(f.rule), (None, None))
    if page is None:
        return ""
    store = getattr(f, "store_name", None) if page == "state" else None
    operator = getattr(f, "operator_id", None) if store else None
    return url_state.link(page, checkpoint=checkpoint, operator=operator, store=store, tab=tab)


def _where(f: Any) -> str:
    parts = []
    if getattr(f, "operator_id", None) is not None:
        parts.append(f"operator {f.operator_id}")
    if getattr(f, "store_name", None):
        parts.append(f"store {f.store_name}")
    if getattr(f, "partition_id", None) is not None:
        parts.append(f"partition {f.partition_id}")
    return ", ".join(parts)


def _leak_link(checkpoint: str, leaking: set[int]) -> None:
    """The state leak rule's rows in SQL: those older than the watermark it judged against;
    for an operator the rule warns about (``leaking``), the rewrite that drops them too."""
    from stateglass.app import sql_examples
    from stateglass.app.fixes import leak_fix

    linked = False
    for row in context.load(queries.newest_watermarks, checkpoint).itertuples():
        target = sql_examples.leak_target(row.kind, row.event_time_field or "", row.store_name)
        if target is None:
            continue
        operator_id, wm = int(row.operator_id), int(row.watermark_ms)
        ref = sql_link.table_of(checkpoint, operator_id, target.label)
        if not linked:
            where = f"operator {operator_id} / {target.label}"
            sql_link.link(
                sql_examples.overdue_keys(ref, target, wm),
                f"State leak: the keys older than the watermark in {md(where)}, in SQL",
            )
            linked = True
        if operator_id in leaking:
            fix_panel.render(leak_fix(checkpoint, ref, operator_id, target, wm))
            leaking = leaking - {operator_id}


def _growing(findings: pd.DataFrame) -> list[tuple[int, str]]:
    """The stores the unbounded_state rule warns about: ``(operator, store)``."""
    warned = findings["rule_id"].eq("unbounded_state") & findings["status"].isin(["WARN", "ERR"])
    rows = findings.loc[warned, ["operator_id", "store_name"]].dropna()
    return [(int(r.operator_id), str(r.store_name)) for r in rows.itertuples()]


def _unbounded_fixes(checkpoint: str, growing: list[tuple[int, str]]) -> None:
    """A Plan a fix panel per store that only grows: what a rewrite can and cannot do."""
    from stateglass.app.dashboard import state_ui
    from stateglass.app.fixes import unbounded_fix
    from stateglass.collectors.checkpoints.state_views import StateView, views_of

    stores = {(s.operator_id, s.store_name): s for s in _stores(checkpoint)}
    for operator_id, store_name in growing:
        ref = sql_link.table_of(checkpoint, operator_id, store_name)
        idle_since = None
        store = stores.get((operator_id, store_name))
        # A store of several tables (transformWithState's variables) has no one row to compare.
        if store is not None and len(views_of(store, checkpoint)) == 1:
            retained = state_ui.retained_versions(StateView(checkpoint, operator_id, store_name))
            # Version v holds the state after batch v - 1: idle since the oldest, if older.
            idle_since = min(retained) - 1 if retained and len(retained) > 1 else None
        fix_panel.render(unbounded_fix(checkpoint, ref, operator_id, store_name, idle_since))


def _stores(checkpoint: str) -> list[StoreInfo]:
    """The checkpoint's stores; none when it cannot be opened (the page shows the findings)."""
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

    try:
        return Checkpoint.open(checkpoint).stores()
    except context.USER_ERRORS:
        return []


def _report_button(db: str, checkpoint: str) -> None:
    from stateglass.app.report import render_html

    # Built on request (a click), kept per database version: a new commit means a new report.
    key = f"sg_report:{checkpoint}:{queries.data_version(db)}"
    if st.button("Prepare the HTML report", help="Self-contained, works offline"):
        # A report is about 5 MB (plotly.js inlined): keep only the newest in the session.
        for old in [k for k in st.session_state if str(k).startswith("sg_report:")]:
            del st.session_state[old]
        try:
            with st.spinner("Writing the report…"):
                st.session_state[key] = render_html(db, checkpoint)
        except Exception as exc:  # one line on the page, not a traceback
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            st.error(f"The report could not be made: {md(why)}", icon="🚫")
    if key in st.session_state:
        name = os.path.basename(checkpoint.rstrip(os.sep)) or "checkpoint"
        st.download_button(
            "Download report",
            data=st.session_state[key],
            file_name=f"stateglass-{name}.html",
            mime="text/html",
            icon="⬇️",
        )


def render() -> None:
    st.title("Health")
    st.caption(
        "Will this query restart, and is it healthy? The restart verdict mirrors how Spark "
        "loads the state; each rule reads the collected history and gives OK, WARN or "
        "ERR with the numbers behind it and what to do. `stateglass check` prints the same "
        "table and exits 0/1/2; thresholds and their defaults are in docs/health.md."
    )
    checkpoint = context.pick_checkpoint()
    if checkpoint is None:
        return
    db = context.db_path()
    try:
        verdict, findings = _findings(
            db, queries.change_key(db, checkpoint), checkpoint, context.health_config_path()
        )
    except Exception as exc:  # the page must say what failed, not show a traceback
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        st.error(f"Health rules could not run: {md(why)}", icon="🚫")
        return
    _verdict(checkpoint, verdict)
    off = context.disabled_rules()
    if off:
        st.caption(
            f"Turned off by {md_code(context.health_config_path() or '')}: "
            + ", ".join(md_code(rule) for rule in off)
            + " (not judged, not listed)."
        )
    if findings.empty:
        st.info("No rule applies to this checkpoint yet.")
    else:
        counts = findings["status"].value_counts()
        cols = st.columns(4)
        for col, status in zip(cols[:3], ("OK", "WARN", "ERR"), strict=True):
            col.metric(f"rules {status}", int(counts.get(status, 0)))
        cols[3].metric(
            "not judged",
            int(counts.get("SKIP", 0)),
            help="Rules that could not judge (status SKIP): no progress events without "
            "--progress, or a stall on a copy no query writes to. Not counted as OK.",
        )
        # What needs attention, in full: the table cuts long findings to its column width.
        for _, f in findings[findings["status"].isin(["WARN", "ERR"])].iterrows():
            show = st.error if f["status"] == "ERR" else st.warning
            show(
                f"**{md(f['rule'])}**: {md(f['finding'])}  \n*What to do:* {md(f['what to do'])}"
                + (
                    f"  \n{url_state.markdown_link('See the numbers →', f['evidence'])}"
                    if f["evidence"]
                    else ""
                )
            )
        warned = findings["rule_id"].eq("state_leak") & findings["status"].isin(["WARN", "ERR"])
        leaking = {int(o) for o in findings.loc[warned, "operator_id"].dropna()}
        growing = _growing(findings)
        findings = findings.drop(columns=["evidence", "rule_id", "operator_id", "store_name"])
        if not findings["where"].astype(bool).any():
            findings = findings.drop(columns="where")
        # st.table renders every cell as Markdown: store and field names come from the
        # checkpoint, so each text cell is escaped to show exactly its text.
        for column in ("rule", "where", "finding", "what to do"):
            if column in findings:
                findings[column] = findings[column].map(md)
        styled = findings.style.map(
            lambda v: f"background-color: {STATUS_COLORS.get(v, '')}", subset=["status"]
        )
        # A static table wraps long findings; a data grid would cut them at its column width.
        st.table(styled.hide(axis="index"))
        _leak_link(checkpoint, leaking)
        _unbounded_fixes(checkpoint, growing)
    st.subheader("Report")
    st.caption(
        "The same HTML as `stateglass report CHECKPOINT -o report.html`: health verdicts, "
        "batch timeline, state size and keys over time, partition heatmap, skew, snapshot "
        "lag, operators and schemas. plotly.js is inlined: it opens offline."
    )
    _report_button(db, checkpoint)
