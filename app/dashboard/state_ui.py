"""What the Browse, Diff and Key history pages share: the view picker, versions, the cache note.

The state itself is read from the checkpoint's files (``stateglass.app.browse``); the database
lists checkpoints and stores, and gives Browse the row total of a plain store (the collector's
key counts), so its first page reads only the partitions it shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import pandas as pd
import pyarrow as pa
import streamlit as st

from stateglass.app.browse import store as browse_store
from stateglass.app.browse.cells import epoch_ms_as_timestamps
from stateglass.app.browse.table import key_jsons
from stateglass.app.dashboard import context, url_state
from stateglass.app.render.arrow_rows import decoded_value, integer_type
from stateglass.app.render.arrow_values import spark_text
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_views import StateView, open_source, versions, views_of
from stateglass.parsers.arrow_types import spark_type
from stateglass.parsers.units import fmt_bytes

T = TypeVar("T")

PAGE_SIZES = (25, 50, 100, 250, 500)
USER_ERRORS = context.USER_ERRORS


# Why Overview's key count exceeds one state variable's rows (transformWithState).
RAW_KEYS_NOTE = (
    "Rows here are one state variable's. Key counts elsewhere (Overview, State) are Spark's "
    "numKeys: raw keys across all the store's column families (every state variable, "
    "timers, TTL indexes), so they are larger."
)


def pick_view() -> StateView | None:
    """Sidebar: checkpoint, operator/store, and the state variable when the store has several."""
    selection = context.pick_store()
    if selection is None:
        return None
    try:
        cp = Checkpoint.open(selection.checkpoint)
        store = cp.store(selection.operator_id, selection.store_name)
    except USER_ERRORS as exc:
        context.show_error(exc)
        return None
    options = views_of(store, cp.root)
    if len(options) == 1:
        url_state.keep(var=None)
        return options[0]
    labels = [v.label for v in options]
    current = st.session_state.get("sg_state_var")
    choice = st.sidebar.selectbox(
        "State variable",
        labels,
        index=url_state.start_index(url_state.STATE_VAR, labels, current),
        key="sg_state_var_widget",
        help="transformWithState keeps one table per state variable; timers are read apart.",
    )
    st.session_state["sg_state_var"] = choice
    url_state.keep(var=choice)
    st.sidebar.caption(RAW_KEYS_NOTE)
    return options[labels.index(choice)]


@st.cache_data(ttl=5, max_entries=64, show_spinner=False)
def _versions(view: StateView) -> list[int]:
    return versions(view)


def retained_versions(view: StateView) -> list[int] | None:
    """Versions every partition can be read at (cached for a few seconds); None on error."""
    try:
        found = _versions(view)
    except USER_ERRORS as exc:
        context.show_error(exc)
        return None
    if not found:
        st.info("No state version can be read from this store's files yet.")
        return None
    return found


def version_slider(label: str, options: list[int], key: str, **kwargs: Any) -> Any:
    """A slider over versions, each labelled with its batch id and version."""
    return st.select_slider(label, options=options, format_func=batch_label, key=key, **kwargs)


def follow_newest(base: str, options: list[int], newest: Any) -> tuple[str, bool]:
    """The widget key to create a version widget under, and whether the user pinned it.

    Create the widget with that key and ``value=newest``. A live job adds versions between
    reruns: a widget left on the previous newest value is replaced by a fresh one under a
    new key, which starts at the new ``newest`` (a new key, because writing into a widget's
    state makes Streamlit warn, and dropping it leaves the browser's slider behind). Any
    other choice still retained stays put: that is the pin.
    """
    generation = int(st.session_state.get(f"{base}:generation", 0))
    key = f"{base}#{generation}"
    current = st.session_state.get(key)
    if isinstance(current, list):
        current = tuple(current)
    previous = st.session_state.get(f"{base}:newest")
    st.session_state[f"{base}:newest"] = newest
    values = current if isinstance(current, tuple) else (current,)
    if current is None:
        return key, False
    if not all(v in options for v in values) or (current == previous != newest):
        st.session_state[f"{base}:generation"] = generation + 1
        return f"{base}#{generation + 1}", False
    return key, current != newest


def url_version(base: str, options: list[int], label: str = "Version") -> tuple[int, bool]:
    """A version slider that follows the newest version, starts at the URL's batch when
    there is one, and writes a pinned batch back to the URL; (version, pinned)."""
    newest = options[-1]
    # The URL's batch only where the session has shown this store none yet: "Show newest"
    # makes a fresh widget too, which must not go back to the URL's.
    opening = f"{base}:newest" not in st.session_state
    key, pinned = follow_newest(base, options, newest)
    wanted = url_state.read_int(url_state.BATCH)
    start = newest
    if opening and wanted is not None and wanted + 1 in options:
        start = wanted + 1
    version = int(version_slider(label, options, key=key, value=start))
    pinned = pinned or version != newest
    url_state.keep(batch=version - 1 if pinned else None)
    return version, pinned


def url_version_pair(base: str, options: list[int], label: str) -> tuple[int, int, bool]:
    """A two-handled version slider that follows the two newest versions, starts at the
    URL's pair of batches (``from`` and ``batch``) when there is one, and writes a pinned
    pair back to the URL; (older version, newer version, pinned)."""
    newest = (options[-2], options[-1])
    opening = f"{base}:newest" not in st.session_state
    key, pinned = follow_newest(base, options, newest)
    wanted = (url_state.read_int(url_state.FROM_BATCH), url_state.read_int(url_state.BATCH))
    start = newest
    if opening and None not in wanted:
        versions = (int(wanted[0] or 0) + 1, int(wanted[1] or 0) + 1)
        if all(v in options for v in versions) and versions[0] < versions[1]:
            start = versions
    before, after = (int(v) for v in version_slider(label, options, key=key, value=start))
    pinned = pinned or (before, after) != newest
    url_state.keep(
        **{
            url_state.FROM_BATCH: before - 1 if pinned else None,
            url_state.BATCH: after - 1 if pinned else None,
        }
    )
    return before, after, pinned


def history_links(view: StateView, table: pa.Table, df: pd.DataFrame) -> dict[str, Any]:
    """``df`` gains a first column linking each row's key to Key history; the column's
    config for ``st.dataframe`` (nothing when the page carries no keys)."""
    keys = key_jsons(table)
    if keys is None or len(keys) != len(df):
        return {}
    var = view.label if st.session_state.get("sg_state_var") == view.label else None
    df.insert(
        0,
        "history",
        [
            url_state.link(
                "key-history",
                checkpoint=view.checkpoint,
                operator=view.operator_id,
                store=view.store_name,
                var=var,
                key=key,
            )
            for key in keys
        ],
    )
    return {
        "history": st.column_config.LinkColumn(
            "key history",
            display_text="history →",
            help="This key's value at every retained version (Key history), in a new tab.",
        )
    }


def live_note(base: str, options: list[int], shown: int, pinned: bool) -> None:
    """``Showing batch 122 · version 123 (pinned) · 12 newer batches`` and a way back."""
    newer = sum(1 for v in options if v > shown)
    if not pinned:
        st.caption(
            f"Showing the newest committed {batch_label(shown)}; it follows the job as new "
            "batches commit. Move the slider to pin a version."
        )
        return
    text, button = st.columns([5, 1])
    text.caption(
        f"Showing {batch_label(shown)} (pinned) · {newer:,} newer batch{'' if newer == 1 else 'es'}"
    )

    def _newest() -> None:
        # A fresh widget under the next key starts at the newest version.
        generation = int(st.session_state.get(f"{base}:generation", 0))
        st.session_state[f"{base}:generation"] = generation + 1

    button.button("Show newest", key=f"{base}:show_newest", on_click=_newest)


def partition_filter(view: StateView, key: str, box: Any = st) -> int | None:
    """``All`` or one partition."""
    try:
        partitions = open_source(view).partitions
    except USER_ERRORS:
        partitions = []
    choice = box.selectbox("Partition", ["All", *partitions], key=key)
    return None if choice == "All" else int(choice)


def frame(table: pa.Table, first_row: int = 1) -> pd.DataFrame:
    """An Arrow page as a DataFrame numbered from ``first_row`` (rows of the whole result).

    Decimals go as text (``str`` of a ``Decimal`` is Java's ``BigDecimal.toString``): the
    browser would round them to doubles, and 38 digits do not fit in one. So do times of day,
    as DuckDB's text: pandas' ``time`` has no ``24:00:00`` and no nanoseconds.
    """
    for i, f in enumerate(table.schema):
        if pa.types.is_decimal(f.type):
            text = [None if d is None else str(d) for d in table.column(i).to_pylist()]
            table = table.set_column(i, f.name, pa.array(text, type=pa.string()))
        elif _holds_time(f.type):
            # A time inside a list, map or struct: its column as Spark's JSON of it (as CSV
            # prints it), each time in DuckDB's text.
            nested = not pa.types.is_time(f.type)
            shown = spark_text()(spark_type(f.type)) if nested else str
            convert = decoded_value(f.type)
            held = table.column(i).cast(integer_type(f.type)).to_pylist()
            text = [None if v is None else shown(convert(v)) for v in held]
            table = table.set_column(i, f.name, pa.array(text, type=pa.string()))
    df = table.to_pandas()
    df.index = pd.RangeIndex(first_row, first_row + len(df))
    return epoch_ms_as_timestamps(df)


def _holds_time(at: pa.DataType) -> bool:
    """Whether ``at`` is a time of day or holds one (in a list, map or struct)."""
    t = pa.types
    if t.is_time(at):
        return True
    if t.is_struct(at):
        return any(_holds_time(f.type) for f in at)
    if t.is_map(at):
        return _holds_time(at.key_type) or _holds_time(at.item_type)
    if t.is_list(at) or t.is_large_list(at) or t.is_fixed_size_list(at):
        return _holds_time(at.value_type)
    return False


def table_height(rows: int, most: int = 20) -> int:
    """Pixels for a table showing up to ``most`` rows without an inner scroll bar."""
    return 38 + 35 * max(1, min(rows, most)) + 18  # 18: room for a horizontal scroll bar


def cache_note() -> None:
    versions_cached, size = browse_store.CACHE.stats()
    limit = browse_store.CACHE.max_bytes
    st.caption(
        f"Cached in this server's memory: {versions_cached} version(s) read recently, "
        f"{fmt_bytes(size)} of {fmt_bytes(limit)} (least recently used go "
        "first). "
        "Only the page on screen is sent to the browser."
    )


def progress_text(done: int, total: int, rows: int) -> str:
    return f"Read {done} of {total} partition(s): {rows:,} row(s) so far"


def run_with_progress(steps: Iterable[tuple[float, T]], text: str) -> T | None:
    """Drain ``(fraction, result)`` steps under a progress bar; the last result, or None.

    A reader error shows as one line on the page (and gives None), never as a traceback.
    """
    status = st.empty()
    result = None
    try:
        for fraction, found in steps:
            status.progress(fraction, text=f"{text} {fraction:.0%}")
            result = found
    except USER_ERRORS as exc:
        status.empty()
        context.show_error(exc)
        return None
    status.empty()
    return result


def batch_label(version: int) -> str:
    """``batch 11 · version 12``: Spark's reader names batch ids, the files name versions."""
    return f"batch {version - 1} · version {version}"
