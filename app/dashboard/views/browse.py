"""Browse: the state at one version, page by page, with partition filter and key search."""

from __future__ import annotations

import streamlit as st

from stateglass.app import queries
from stateglass.app.browse.overdue import EVENT_TIME_COLUMN, overdue_page
from stateglass.app.browse.table import PageRequest, iter_page, one_row_per_key
from stateglass.app.dashboard import context, sql_link, state_ui
from stateglass.app.dashboard.state_ui import batch_label
from stateglass.app.escape import md, md_code
from stateglass.collectors.checkpoints.state_views import StateView, open_source
from stateglass.parsers.units import utc_ms


def _reset_page_when(changed: tuple[object, ...]) -> None:
    """Back to page 1 when what is paged changes (other version, filter or search)."""
    if st.session_state.get("sg_browse_query") != changed:
        st.session_state["sg_browse_query"] = changed
        st.session_state["sg_browse_page"] = 1


def render() -> None:
    st.title("Browse state")
    st.caption(
        "What the state store holds at one version: every key and its value, as Spark's "
        "`statestore` reader returns them. Nested fields are flattened into columns "
        "(`key.a.b`); arrays and maps are shown as JSON."
    )
    view = state_ui.pick_view()
    if view is None:
        return
    options = state_ui.retained_versions(view)
    if options is None:
        return
    base = f"sg_browse_version:{view}"
    version, pinned = state_ui.url_version(base, options)
    state_ui.live_note(base, options, version, pinned)
    left, middle, right, size_box = st.columns([1, 3, 1, 1])
    partition = state_ui.partition_filter(view, key=f"sg_browse_partition:{view}", box=left)
    search = middle.text_input(
        "Search keys",
        key="sg_browse_search",
        bind="query-params",
        placeholder="a substring of any key column, any case",
        help="Matches the key's values as Spark's JSON writes them "
        "(timestamps like 2024-01-01T00:40:00.000Z).",
    ).strip()
    page_size = size_box.selectbox("Rows per page", state_ui.PAGE_SIZES, index=1)
    if _overdue_filter(view, version, partition, page_size):
        return
    _reset_page_when((view, version, partition, search, page_size))
    page = int(right.number_input("Page", min_value=1, step=1, key="sg_browse_page"))
    request = PageRequest(view, version, partition, search, page, page_size)
    known = None if search else _collected_keys(view, version, partition)

    status, table_slot, footer = st.empty(), st.empty(), st.empty()
    shown = False
    update = None
    try:
        for update in iter_page(request, total=known):
            if update.partitions_done < update.partitions_total:
                status.progress(
                    update.fraction,
                    text=state_ui.progress_text(
                        update.partitions_done, update.partitions_total, update.rows_seen
                    ),
                )
            if update.table is not None and not shown:
                df = state_ui.frame(update.table, request.offset + 1)
                table_slot.dataframe(
                    df,
                    width="stretch",
                    height=state_ui.table_height(update.table.num_rows),
                    column_config=state_ui.history_links(view, update.table, df),
                )
                shown = True
    except state_ui.USER_ERRORS as exc:
        status.empty()
        context.show_error(exc)
        return
    status.empty()
    if update is None or update.total is None:
        return
    total = update.total
    where = "" if partition is None else f" in partition {partition}"
    matching = f" whose key contains “{md(search)}”" if search else ""
    if total == 0:
        table_slot.info(f"No rows{matching}{where} at {batch_label(version)}.")
    pages = max(1, -(-total // page_size))
    first = min(request.offset + 1, total)
    last = min(request.offset + page_size, total)
    footer.caption(
        f"Rows {first:,}–{last:,} of **{total:,}**{matching}{where} at {batch_label(version)}; "
        f"page {page} of {pages:,}. Row numbers count across partitions, in the order "
        "Spark's reader returns them."
    )
    if page > pages:
        st.warning(f"There are only {pages:,} page(s).")
    sql_link.link(sql_link.rows_query(view, version, partition), "These rows, in SQL")
    state_ui.cache_note()


def _collected_keys(view: StateView, version: int, partition: int | None) -> int | None:
    """The rows at ``version`` as the collector counted them (one row per key), so the page
    needs only the partitions it shows; None when the database cannot say."""
    if not one_row_per_key(view):
        return None
    held = open_source(view).partitions_for(version - 1)
    wanted = held if partition is None else [partition]
    return context.load(
        queries.keys_at_version,
        view.checkpoint,
        view.operator_id,
        view.store_name,
        version,
        wanted,
    )


# ---- the eviction audit's "overdue" filter -------------------------------------------------------


def _overdue_filter(view: StateView, version: int, partition: int | None, limit: int) -> bool:
    """The "Overdue only" toggle; True when it is on and this block drew the page."""
    on = st.toggle(
        "Overdue only",
        key="sg_browse_overdue",
        bind="query-params",
        help="Keys Spark should already have evicted at this version: those matching its "
        "eviction predicate at the watermark of the batch that wrote the version.",
    )
    if not on:
        return False
    try:
        with st.spinner("Looking for overdue keys…"):
            found = overdue_page(view, version, partition, limit)
    except state_ui.USER_ERRORS as exc:
        context.show_error(exc)
        return True
    rule = found.rule
    if not rule.audited:
        why = rule.cause or rule.predicate
        if rule.kind == "join_value":
            why = (
                f"Spark evicts this join side when {rule.predicate}; the time bound is not "
                "recorded in the checkpoint, so overdue values cannot be told"
            )
        st.info(f"No overdue filter for this store: {md(why)}.", icon="ℹ️")
        return True
    if found.watermark_ms is None:
        st.info(f"No watermark is known for {batch_label(version)}.", icon="ℹ️")
        return True
    where = "" if partition is None else f" in partition {partition}"
    predicate = md_code(rule.predicate)
    wm = f"watermark {utc_ms(found.watermark_ms)} UTC"
    if found.found == 0:
        st.success(
            f"No overdue keys{where} at {batch_label(version)}: none of {found.scanned:,} "
            f"rows matches {predicate} ({wm}).",
            icon="✅",
        )
        return True
    st.warning(
        f"**{found.found:,}** overdue row(s){where} at {batch_label(version)}: they match "
        f"{predicate} ({wm}), so Spark should have removed them. The first "
        f"{min(found.found, limit):,} are shown; `{EVENT_TIME_COLUMN}` is the event time "
        "the predicate compared (UTC).",
        icon="⚠️",
    )
    assert found.table is not None
    st.dataframe(
        state_ui.frame(found.table),
        width="stretch",
        height=state_ui.table_height(found.table.num_rows),
    )
    return True
