"""Key history: one key's value at every retained version, absent ones marked."""

from __future__ import annotations

import streamlit as st

from stateglass.app.browse.key_history import (
    KeyRef,
    collapse_absent,
    find_key_json,
    find_keys_back,
    history_figure,
    iter_history,
    numeric_columns,
    timeline,
)
from stateglass.app.dashboard import context, state_ui, url_state
from stateglass.app.dashboard.state_ui import batch_label
from stateglass.app.escape import md, md_code
from stateglass.collectors.checkpoints.state_views import StateView

MATCHES_SHOWN = 50
STATUS_HELP = (
    "present (first version shown), added, changed, unchanged (same stored value as the "
    "version before), removed, absent"
)


def _pick_key(view: StateView, latest: int, options: list[int]) -> KeyRef | None:
    """A key from a search over the newest version's keys, or one pasted as JSON."""
    # A link (Browse's "history →", a pasted URL) names the key as JSON.
    linked = url_state.read(url_state.KEY)
    if linked is not None and "sg_history_how" not in st.session_state:
        st.session_state["sg_history_how"] = "pasted as JSON"
        st.session_state["sg_history_json"] = linked
    how = st.radio(
        "Find the key", ["by search", "pasted as JSON"], horizontal=True, key="sg_history_how"
    )
    if how == "by search":
        url_state.keep(key=None)
        search = st.text_input(
            "Key contains",
            key="sg_history_search",
            placeholder="a substring of any key column, any case",
            help=f"Searches the keys at {batch_label(latest)}, then older retained versions "
            "until one holds a match (a removed key is found where it last was).",
        ).strip()
        try:
            with st.spinner("Searching the keys, newest retained version first…"):
                at, refs = find_keys_back(view, options, search, limit=MATCHES_SHOWN)
        except state_ui.USER_ERRORS as exc:
            context.show_error(exc)
            return None
        if at is None:
            st.info(
                f"No retained version ({batch_label(options[0])} to {batch_label(latest)}) "
                f"holds a key that contains “{md(search)}”. A key with quotes or braces can "
                "be **pasted as JSON** (above) as `stateglass state` prints it."
            )
            return None
        if at != latest:
            st.info(
                f"No key at {batch_label(latest)} contains “{md(search)}”: these are from "
                f"{batch_label(at)}, the newest retained version that holds one. The history "
                "below says when each was removed."
            )
        labels = [f"partition {r.partition} · {r.label}" for r in refs]
        chosen = st.selectbox(
            "Key",
            labels,
            key=f"sg_history_pick:{view}",
            help=f"The first {MATCHES_SHOWN} matching keys at {batch_label(at)}, in store order.",
        )
        return refs[labels.index(chosen)] if chosen is not None else None
    text = st.text_area(
        "Key JSON",
        key="sg_history_json",
        placeholder='{"user":"user07"}',
        help="The key as `stateglass state` prints it (for map state: "
        '{"key":…,"user_map_key":…}); compared by value, whitespace ignored. '
        "Press Ctrl+Enter to look it up.",
    ).strip()
    url_state.keep(key=text or None)
    if not text:
        return None
    try:
        with st.spinner("Looking for this key, newest version first…"):
            ref = find_key_json(view, options, text)
    except state_ui.USER_ERRORS as exc:
        context.show_error(exc)
        return None
    if ref is None:
        st.warning("No retained version holds this key.")
    return ref


def render() -> None:
    st.title("Key history")
    st.caption(
        "One key's value at every retained version of the store: when it appeared, how its "
        "value moved, when it was removed. Versions without the key are marked absent."
    )
    view = state_ui.pick_view()
    if view is None:
        return
    options = state_ui.retained_versions(view)
    if options is None:
        return
    ref = _pick_key(view, options[-1], options)
    if ref is None:
        return
    st.markdown(f"**Key** {md_code(ref.label)}")
    table = state_ui.run_with_progress(
        iter_history(view, ref, options), "Looking the key up in each version…"
    )
    if table is None:
        return
    present = sum(1 for s in table.column("status").to_pylist() if s not in ("absent", "removed"))
    moves = list(dict.fromkeys(table.column("partition_id").to_pylist()))
    where = (
        f"Partition {ref.partition}"
        if len(moves) < 2
        else "Partitions " + " → ".join(map(str, moves)) + " (a repartition moved the key)"
    )
    when = timeline(table)
    if when:
        st.markdown(f"**{md(when[0].upper() + when[1:])}.**")
    st.caption(
        f"{where}; present in {present} of {len(options)} retained "
        f"version(s). Status: {STATUS_HELP}."
    )
    df = state_ui.frame(collapse_absent(table))
    st.dataframe(df, width="stretch", hide_index=True, height=state_ui.table_height(len(df)))
    numbers = numeric_columns(table)
    if not numbers:
        st.caption("The value has no numeric field to chart.")
        return
    picked = st.multiselect(
        "Numeric fields to chart", numbers, default=numbers[: min(3, len(numbers))]
    )
    if picked:
        st.plotly_chart(history_figure(df, picked, ref.partition), width="stretch")
        st.caption(
            "How the key's numeric value fields moved over versions (gaps: the key was absent)."
        )
