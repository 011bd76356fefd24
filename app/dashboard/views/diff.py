"""Diff: which keys two versions of a store add, remove and change, with before and after."""

from __future__ import annotations

import streamlit as st

from stateglass.app.browse.diff import DiffResult, diff_page, iter_diff
from stateglass.app.dashboard import context, state_ui
from stateglass.app.dashboard.state_ui import batch_label

CAPTIONS = {
    "added": "Keys present in the newer version only, with their value there.",
    "removed": "Keys present in the older version only, with the value they had.",
    "changed": "Keys in both versions whose value differs: one row per changed field, "
    "before (older version) and after (newer version).",
}


def _tab(result: DiffResult, kind: str, count: int) -> None:
    st.caption(CAPTIONS[kind])
    if count == 0:
        st.info(f"No {kind} keys.")
        return
    size_box, page_box, _ = st.columns([1, 1, 4])
    size = size_box.selectbox(
        "Keys per page", state_ui.PAGE_SIZES, index=1, key=f"sg_diff_{kind}_size"
    )
    pages = max(1, -(-count // size))
    page_key = f"sg_diff_{kind}_page:{result.before}-{result.after}"
    # No max_value: a page number kept from a larger diff must not raise; show the last page.
    page = min(int(page_box.number_input("Page", min_value=1, step=1, key=page_key)), pages)
    try:
        table = diff_page(result, kind, page, size)
    except state_ui.USER_ERRORS as exc:
        context.show_error(exc)
        return
    first = (page - 1) * size + 1
    st.dataframe(
        state_ui.frame(table, first),
        width="stretch",
        hide_index=kind == "changed",
        height=state_ui.table_height(table.num_rows),
    )
    st.caption(
        f"{kind.capitalize()} keys {first:,}–{min(first + size - 1, count):,} of {count:,}; "
        f"page {page} of {pages:,}."
    )


def render() -> None:
    st.title("Diff two versions")
    st.caption(
        "What one version of the state changed compared with another: keys added, keys "
        "removed, and keys whose value changed. Keys are matched by their stored bytes within "
        "a partition; list state is compared as whole lists."
    )
    view = state_ui.pick_view()
    if view is None:
        return
    options = state_ui.retained_versions(view)
    if options is None:
        return
    if len(options) < 2:
        st.info(f"Only one version is retained ({batch_label(options[0])}): nothing to compare.")
        return
    base = f"sg_diff_versions:{view}"
    before, after, pinned = state_ui.url_version_pair(
        base, options, "Versions to compare (older, newer)"
    )
    state_ui.live_note(base, options, after, pinned)
    if before == after:
        st.info("Pick two different versions.")
        return
    left, _ = st.columns([1, 5])
    partition = state_ui.partition_filter(view, key=f"sg_diff_partition:{view}", box=left)
    result = state_ui.run_with_progress(
        iter_diff(view, before, after, partition), "Reading both versions…"
    )
    if result is None:
        return
    counts = result.counts
    where = "" if partition is None else f" (partition {partition})"
    st.subheader(f"{batch_label(before)} → {batch_label(after)}{where}")
    cols = st.columns(3)
    for col, kind in zip(cols, ("added", "removed", "changed"), strict=True):
        col.metric(f"Keys {kind}", f"{counts[kind]:,}")
    tabs = st.tabs([f"{k.capitalize()} ({counts[k]:,})" for k in ("added", "removed", "changed")])
    for tab, kind in zip(tabs, ("added", "removed", "changed"), strict=True):
        with tab:
            _tab(result, kind, counts[kind])
    state_ui.cache_note()
