"""SQL: ask the state anything, in one read-only DuckDB session over every collected checkpoint.

Each browser session holds its own :class:`~stateglass.collectors.catalog.SqlSession` in
``st.session_state``; every query runs under the session's time and memory limits. The session
reads the history from a private copy: a session lives as long as the browser tab, and one
holding the history file itself would keep the watcher from writing. "Refresh" takes a new copy.

The query lives in the URL (``sql?q=…``), so a link restores it and runs it: the State,
Browse and Health pages link here (``app/dashboard/sql_link.py``). Results are Arrow, shown
with ``st.dataframe`` (never as HTML) and paged; they download as CSV or Parquet. A query
that compares ``batch_id`` yet read a table's last batch gets the note ``stateglass sql``
prints on stderr, under its result.
"""

from __future__ import annotations

import io
import os
import time
import weakref
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq
import streamlit as st

from stateglass.app import sql_examples
from stateglass.app.dashboard import context, state_ui
from stateglass.app.dashboard.sql_link import QUERY_PARAM
from stateglass.app.errors import AppError
from stateglass.app.escape import md, md_code
from stateglass.app.figures.sql import numeric_columns, result_chart
from stateglass.app.render.arrow_values import spark_text
from stateglass.app.sql_output import csv_bytes, unpicked_batch_note
from stateglass.collectors.catalog import SqlLimits, SqlSession, TableEntry
from stateglass.collectors.catalog.names import quoted
from stateglass.collectors.errors import BadConfig, CollectorError

# Rows kept of one result: what reaches Python is outside DuckDB's memory_limit.
MAX_ROWS = 100_000
# Seconds a query may run (``stateglass dashboard`` leaves it unset: the default below).
TIME_LIMIT_ENV = "STATEGLASS_SQL_TIME_LIMIT"
TIME_LIMIT_S = 30.0
ERRORS = (CollectorError, AppError)
Span = tuple[int, int]  # first and last retained batch id
EDITOR = "sg_sql_text"


@dataclass
class _Held:
    """The browser session's SQL session, and what it was opened on."""

    session: SqlSession
    roots: tuple[str, ...]
    db: str
    opened: float


def _session(refresh: bool) -> SqlSession | None:
    """This browser session's SQL session, opened (again) when the checkpoints changed."""
    roots, db = tuple(context.checkpoints()), context.db_path()
    held: _Held | None = st.session_state.get("sg_sql_session")
    if held is not None and not refresh and (held.roots, held.db) == (roots, db):
        return held.session
    if held is not None:
        held.session.close()
        del st.session_state["sg_sql_session"]
    try:
        with st.spinner("Opening the SQL catalog…"):
            session = SqlSession(
                list(roots),
                history=db,
                limits=limits(),
                copy_history=True,
                # Intervals and variants as Spark's JSON text, as `stateglass sql` shows them.
                text_form=spark_text(),
            )
    except ERRORS as exc:
        context.show_error(exc)
        return None
    held = _Held(session, roots, db, time.time())
    # A browser session that ends drops its state: close the connection and its private copy.
    weakref.finalize(held, session.close)
    st.session_state["sg_sql_session"] = held
    return session


def limits() -> SqlLimits:
    """Each query's bounds: the catalog's defaults, with ``$STATEGLASS_SQL_TIME_LIMIT`` seconds."""
    text = os.environ.get(TIME_LIMIT_ENV, "")
    try:
        seconds = float(text) if text else TIME_LIMIT_S
    except ValueError:
        raise BadConfig(TIME_LIMIT_ENV, f"not a number of seconds: {text!r}") from None
    return SqlLimits(time_s=seconds)


def render() -> None:
    st.title("SQL")
    st.caption(
        "Ask the state anything: every collected checkpoint is a schema, every store a table "
        "at the last committed batch (`WHERE batch_id = N` reads a retained batch N instead), "
        "beside the history database as `history`; `stateglass.tables` lists them all. "
        "Read-only, with a time and a memory limit per query; `stateglass sql` runs the same "
        "SQL from a shell."
    )
    top = st.columns([6, 1])
    refresh = top[1].button(
        "Refresh",
        help="Re-read the list of checkpoints and take a new copy of the history database.",
    )
    session = _session(refresh)
    if session is None:
        return
    try:
        tables = session.tables()
    except ERRORS as exc:
        context.show_error(exc)
        return
    _show_the_query_run()
    checkpoint = context.pick_checkpoint()
    editor, names = st.columns([3, 1])
    with names:
        _catalog_names(session, tables, checkpoint)
    with editor:
        if checkpoint is not None:
            _examples(session, tables, checkpoint)
        _editor()
    query = st.session_state.get("sg_sql_run")
    if query:
        _result(session, str(query))


def _show_the_query_run() -> None:
    """The editor shows the query whose result is below it, and the URL holds that query.

    A link's query (a new ``q=``) fills the editor and runs. Otherwise the query last run is
    the page's own: a visit to another page (where a checkpoint may be picked) drops the
    editor's text with its widget, and a reload sends no widget values, so both put the
    query run back rather than show its rows under an empty editor. A checkpoint change
    keeps both: a query names its schemas itself, it does not follow the sidebar.
    """
    wanted = st.query_params.get(QUERY_PARAM)
    if wanted and wanted != st.session_state.get("sg_sql_from_url"):
        st.session_state["sg_sql_from_url"] = wanted
        st.session_state[EDITOR] = wanted
        st.session_state["sg_sql_run"] = wanted
    ran = st.session_state.get("sg_sql_run")
    if ran and not st.session_state.get(EDITOR):
        st.session_state[EDITOR] = ran
    if ran and wanted != ran:
        # Streamlit clears the URL's parameters when the page changes.
        st.query_params[QUERY_PARAM] = ran


def _editor() -> None:
    with st.form("sg_sql_form", border=False):
        st.text_area(
            "Query",
            key=EDITOR,
            height=160,
            placeholder="SELECT * FROM stateglass.tables",
            help="DuckDB SQL. Names with dots or dashes go in double quotes.",
        )
        submitted = st.form_submit_button("Run", type="primary")
    if submitted:
        text = str(st.session_state.get(EDITOR) or "").strip()
        st.session_state["sg_sql_run"] = text
        # Run again on submit, even the same text: the state may have moved on.
        st.session_state.pop("sg_sql_result_of", None)
        # The URL holds the query: a reload or a shared link restores it.
        st.session_state["sg_sql_from_url"] = text
        st.query_params[QUERY_PARAM] = text


def _catalog_names(session: SqlSession, tables: list[TableEntry], checkpoint: str | None) -> None:
    """Schemas (the sidebar checkpoint's first), their tables and a chosen table's columns."""
    st.markdown("**Catalog**")
    schemas = sorted({t.schema for t in tables})
    if not schemas:
        st.info("No tables: nothing has been collected yet.")
        return
    picked = [t.schema for t in tables if t.checkpoint == checkpoint]
    first = schemas.index(picked[0]) if picked else 0
    # Keyed on the checkpoint: picking another in the sidebar opens its schema.
    schema = st.selectbox("Schema", schemas, index=first, key=f"sg_sql_schema:{checkpoint}")
    in_schema = [t for t in tables if t.schema == schema]
    checkpoints = {t.checkpoint for t in in_schema if t.checkpoint}
    if checkpoints:
        st.caption(", ".join(md_code(c) for c in sorted(checkpoints)))
    table = st.selectbox("Table", [t.table for t in in_schema], key=f"sg_sql_table:{schema}")
    try:
        columns = _columns(session, schema, str(table))
    except ERRORS as exc:
        context.show_error(exc)
        return
    height = state_ui.table_height(columns.num_rows, 12)
    st.dataframe(columns, hide_index=True, width="stretch", height=height)


def _columns(session: SqlSession, schema: str, table: str) -> pa.Table:
    """``column``, ``type`` of one table, from DuckDB's catalog (decodes nothing)."""
    found = session.columns(schema, table)
    return pa.table({"column": [c for c, _ in found], "type": [t for _, t in found]})


def _examples(session: SqlSession, tables: list[TableEntry], checkpoint: str) -> None:
    """Example queries for the stores of the sidebar's checkpoint, with their real names."""
    mine = [t for t in tables if t.checkpoint == checkpoint]
    # Once per checkpoint and session: the retained batches are read from the checkpoint.
    made = st.session_state.get("sg_sql_examples")
    if made is None or made[0] != (checkpoint, id(session)):
        try:
            found = sql_examples.examples(
                mine, lambda t: session.columns(t.schema, t.table), _retained(session, mine)
            )
        except ERRORS as exc:
            context.show_error(exc)
            return
        made = ((checkpoint, id(session)), found)
        st.session_state["sg_sql_examples"] = made
    examples: list[sql_examples.Example] = made[1]
    if not examples:
        return
    titles = [e.title for e in examples]

    def _fill() -> None:
        picked = st.session_state.get("sg_sql_example")
        if picked in titles:
            st.session_state[EDITOR] = examples[titles.index(picked)].sql

    st.selectbox(
        "Examples for this checkpoint",
        titles,
        index=None,
        key="sg_sql_example",
        placeholder="Pick one to put it in the editor",
        on_change=_fill,
    )


def _retained(
    session: SqlSession, tables: list[TableEntry]
) -> dict[tuple[int, str], tuple[int, int]]:
    """First and last retained batch per (operator, store), from the checkpoint's
    ``state_metadata`` table (read from the checkpoint's files, no state decoded)."""
    meta = [t for t in tables if t.kind == "metadata" and t.table == "state_metadata"]
    if not meta:
        return {}
    rows = session.execute(
        'SELECT "operatorId", "stateStoreName", "minBatchId", "maxBatchId" '
        f"FROM {quoted(meta[0].schema)}.state_metadata"
    ).table.to_pylist()
    return {
        (int(r["operatorId"]), str(r["stateStoreName"])): (
            int(r["minBatchId"]),
            int(r["maxBatchId"]),
        )
        for r in rows
        if r["minBatchId"] is not None and r["maxBatchId"] is not None
    }


@dataclass(frozen=True)
class _Result:
    """A query's rows as the page keeps them between reruns (paging, downloads, chart)."""

    query: str
    table: pa.Table
    truncated: bool
    seconds: float
    # Which run: widgets about a result (page, chart axes) start afresh with a new one.
    run: int
    # Why a comparison of batch_id found nothing: a table read its last batch instead.
    note: str | None = None


def _result(session: SqlSession, query: str) -> None:
    """The result of ``query``: run once, then kept until another query is run (a rerun for
    paging or a download must not run it again, nor a refused or stopped one)."""
    held: _Result | str | None = st.session_state.get("sg_sql_result")
    if st.session_state.get("sg_sql_result_of") != query:
        try:
            with st.spinner("Running…"):
                found = session.execute(query, max_rows=MAX_ROWS)
            note = unpicked_batch_note(query, session.last_batch_read)
            held = _Result(query, found.table, found.truncated, found.seconds, time.time_ns(), note)
        except ERRORS as exc:
            held = str(exc)
        st.session_state["sg_sql_result"] = held
        st.session_state["sg_sql_result_of"] = query
    if not isinstance(held, _Result):
        context.show_error(held)
        return
    table = held.table
    more = f" (the first {MAX_ROWS:,}; the query has more)" if held.truncated else ""
    st.caption(
        f"**{table.num_rows:,}** row(s){more}, {table.num_columns} column(s), "
        f"in {held.seconds:.2f} s."
    )
    if held.note is not None:
        # Table names come from checkpoints' folders: shown as text, never as markup.
        st.info(md(held.note), icon="ℹ️")
    if table.num_columns == 0:
        return
    _page(table, held.run)
    _downloads(table)
    _chart(table, held.run)


def _page(table: pa.Table, run: int) -> None:
    left, right = st.columns([1, 1])
    size = int(left.selectbox("Rows per page", state_ui.PAGE_SIZES, index=1, key="sg_sql_size"))
    pages = max(1, -(-table.num_rows // size))
    page = int(
        right.number_input("Page", min_value=1, max_value=pages, step=1, key=f"sg_sql_page:{run}")
    )
    first = (page - 1) * size
    shown = table.slice(first, size)
    st.dataframe(
        state_ui.frame(shown, first + 1),
        width="stretch",
        height=state_ui.table_height(shown.num_rows),
    )
    st.caption(f"Page {page} of {pages:,}.")


# Each download: its label, what it keeps, how it is made, its file suffix and media type.
DOWNLOADS = (
    ("CSV", "as `stateglass sql --format csv` writes it", "csv", "text/csv"),
    ("Parquet", "every type kept", "parquet", "application/vnd.apache.parquet"),
)


def _downloads(table: pa.Table) -> None:
    makers = {"csv": csv_bytes, "parquet": parquet_bytes}
    for box, (label, keeps, suffix, mime) in zip(st.columns([1, 1, 2]), DOWNLOADS, strict=False):
        box.download_button(
            f"Download {label}",
            help=f"Every row of the result (up to {MAX_ROWS:,}); {keeps}.",
            # Made on the click, not at every rerun.
            data=partial(makers[suffix], table),
            file_name=f"stateglass-query.{suffix}",
            mime=mime,
            icon="⬇️",
            key=f"sg_sql_{suffix}",
        )


def parquet_bytes(table: pa.Table) -> bytes:
    """``table`` as one Parquet file, every type kept."""
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _chart(table: pa.Table, run: int) -> None:
    frame = state_ui.frame(table.slice(0, min(table.num_rows, 10_000)))
    heights = numeric_columns(frame)
    if not heights:
        return
    names = [str(c) for c in frame.columns]
    # A first column beside numbers names the rows (a key, a batch id): draw against it.
    x_default = names[0] if len(names) > 1 and heights != [names[0]] else "row"
    y_options = [h for h in heights if h != x_default] or heights
    with st.expander("Chart", expanded=True):
        cols = st.columns(3)
        y = cols[0].selectbox("Value", y_options, key=f"sg_sql_y:{run}")
        x_options = ["row", *[n for n in names if n != y]]
        x = cols[1].selectbox(
            "Against",
            x_options,
            index=x_options.index(x_default) if x_default in x_options else 0,
            key=f"sg_sql_x:{run}",
        )
        kind = cols[2].radio("As", ["bar", "line"], horizontal=True, key="sg_sql_kind")
        fig = result_chart(frame, None if x == "row" else x, str(y), str(kind))
        st.plotly_chart(fig, width="stretch", key="sg_sql_chart")
        if table.num_rows > len(frame):
            st.caption(f"The first {len(frame):,} rows.")
