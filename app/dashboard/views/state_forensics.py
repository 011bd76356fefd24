"""The State page's forensics: growth attribution and restart cost.

Kept apart from ``state.py`` so each section is one function the page calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from stateglass.app import figures, queries
from stateglass.app.analysis import restart_cost
from stateglass.app.dashboard import context, sql_link
from stateglass.app.dashboard.context import USER_ERRORS
from stateglass.app.dashboard.views import fix_panel
from stateglass.app.escape import md, md_code
from stateglass.parsers.units import fmt_bytes

# Growth attribution reads the checkpoint's state files (Arrow, the store caches, a process
# pool): imported only once the checkpoint has a view to read.
if TYPE_CHECKING:
    from stateglass.app.browse.growth import GrowthAttribution
    from stateglass.collectors.checkpoints.state_views import StateView

WINDOWS = (5, 10, 20, 50, 100)
# The growth section's defaults: browse.growth's DEFAULT_WINDOW and DEFAULT_TOP (a test holds
# them equal), here so that drawing the widgets imports none of the state readers.
DEFAULT_WINDOW = 10
DEFAULT_TOP = 5


@st.cache_data(ttl=600, max_entries=32, show_spinner=False)
def _growth(view: StateView, stamp: int, window: int, top: int) -> GrowthAttribution:
    # ``stamp`` (the store's newest collected version) is only part of the key: a new batch
    # misses the cache, a scan that found nothing new does not.
    from stateglass.app.browse.growth import attribute_growth

    return attribute_growth(view, window=window, top=top)


def _growth_view(selection: context.StoreSelection) -> StateView | None:
    """The store's view, or the chosen state variable when it keeps several."""
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

    try:
        cp = Checkpoint.open(selection.checkpoint)
        store = cp.store(selection.operator_id, selection.store_name)
        # The state readers, only for a checkpoint that opens.
        from stateglass.collectors.checkpoints.state_views import views_of

        options = views_of(store, cp.root)
    except USER_ERRORS as exc:
        context.show_error(exc)
        return None
    options = [v for v in options if not v.read_timers] or options
    if len(options) == 1:
        return options[0]
    labels = [v.label for v in options]
    choice = st.selectbox("State variable", labels, key="sg_growth_var")
    return options[labels.index(choice)]


def _newest_version(selection: context.StoreSelection) -> int:
    lag = context.load(
        queries.snapshot_lag, selection.checkpoint, selection.operator_id, selection.store_name
    )
    return -1 if lag.empty else int(lag["latest_version"].max())


def render_growth(selection: context.StoreSelection) -> None:
    """Which key field values bring the keys added over the last N versions."""
    st.subheader("Growth attribution: where do the new keys come from?")
    left, right = st.columns(2)
    window = int(
        left.select_slider(
            "Window (versions)", WINDOWS, value=DEFAULT_WINDOW, key="sg_growth_window"
        )
    )
    top = int(right.number_input("Top", 1, 20, DEFAULT_TOP, key="sg_growth_top"))
    view = _growth_view(selection)
    if view is None:
        return
    try:
        with st.spinner("Reading the window's versions, one partition at a time…"):
            result = _growth(view, _newest_version(selection), window, top)
    except USER_ERRORS as exc:
        context.show_error(exc)
        return
    st.markdown(f"**{md(result.sentence())}**" + ("." if result.contributors else ""))
    st.caption(
        f"New keys: in the store at version {result.newest} (batch {result.newest - 1}) and "
        f"not at version {result.base}"
        + (" (empty state)" if result.base == 0 else "")
        + ", matched on their stored bytes per partition. Each key counts once per key "
        "field (struct fields by each leaf), so one field's shares add up to 100 %. A value "
        "about as common among all keys now as among the new ones (a constant field) "
        "explains nothing; one far more common among the new keys is the lead."
        + (
            " Counts are lower bounds: a field had too many distinct values to count all."
            if result.approximate
            else ""
        )
        + (" " + result.share_note() if result.share_sample else "")
    )
    if result.contributors:
        table = pd.DataFrame(
            {
                "field": [c.field for c in result.contributors],
                "value": [c.value for c in result.contributors],
                "new keys": [c.keys for c in result.contributors],
                "share of new keys": [f"{c.share:.1%}" for c in result.contributors],
                "share of all keys now": [f"{c.share_of_all:.1%}" for c in result.contributors],
            }
        )
        st.dataframe(table, hide_index=True)
    _growth_fix(selection, view.label, result)
    left, right = st.columns(2)
    with left:
        st.plotly_chart(figures.growth_shares(result), width="stretch", key="growth_shares")
        st.caption("Share of the new keys each top (field, value) accounts for.")
    with right:
        st.plotly_chart(
            figures.growth_contributors(result), width="stretch", key="growth_contributors"
        )
        st.caption(
            "Keys added at each version (absent at the version before) carrying each top "
            "value; grey: every key added. A key evicted and added again counts again here."
        )


def _growth_fix(selection: context.StoreSelection, label: str, result: GrowthAttribution) -> None:
    """Plan a fix: the keys with the value that stands out, dropped by a rewrite."""
    from stateglass.app.fixes import growth_fix

    if result.lead is None:
        return
    ref = sql_link.table_of(selection.checkpoint, selection.operator_id, label)
    fix = growth_fix(selection.checkpoint, ref, selection.operator_id, label, result.lead)
    if fix is not None:
        fix_panel.render(fix)


def _settings(
    selection: context.StoreSelection, facts: pd.DataFrame, live: pd.DataFrame
) -> tuple[str, bool, int | None]:
    provider = context.load(queries.stores, selection.checkpoint)
    row = provider[
        (provider["operator_id"] == selection.operator_id)
        & (provider["store_name"] == selection.store_name)
    ]
    name = str(row["provider"].iloc[0]) if not row.empty else "hdfs"
    changelog = bool(live["kind"].eq("changelog").any())
    return name, changelog, restart_cost.inferred_min_deltas(facts, name, changelog)


def render_restart_cost(selection: context.StoreSelection) -> None:
    """Files, bytes and replays a restart loads per partition, and a what-if."""
    st.subheader("Restart cost: what a restart loads")
    args = (selection.checkpoint, selection.operator_id, selection.store_name)
    facts = context.load(queries.restart_facts, *args)
    live = context.load(queries.live_state_files, *args)
    if facts.empty:
        st.info("No state versions collected for this store yet.")
        return
    provider, changelog, inferred = _settings(selection, facts, live)
    now = restart_cost.current_cost(live, facts)
    _restart_now(now)
    st.markdown("**What if**")
    min_deltas, alt_changelog = _what_if_settings(provider, changelog, inferred)
    alt = restart_cost.what_if(facts, provider, min_deltas, alt_changelog)
    label = f"minDeltas {min_deltas}" + (
        f", changelog {'on' if alt_changelog else 'off'}" if provider == "rocksdb" else ""
    )
    _compare(now, alt, label)


def _restart_now(now: Sequence[restart_cost.PartitionCost]) -> None:
    """What a restart loads today, summed over partitions, and the partitions it cannot load."""
    worst = restart_cost.slowest(now)
    cols = st.columns(4)
    cols[0].metric("files (all partitions)", f"{sum(c.files for c in now):,}")
    cols[1].metric("bytes (all partitions)", fmt_bytes(sum(c.bytes for c in now)))
    cols[2].metric("most replays", f"{max(c.replays for c in now):,}")
    if worst is not None:
        cols[3].metric(
            "slowest partition",
            f"p{worst.partition}",
            help=f"{fmt_bytes(worst.bytes)} in {worst.files} files, {worst.replays} replays",
        )
    broken = [c for c in now if c.missing]
    if broken:
        st.error(
            f"{len(broken)} partition(s) lack a delta or changelog a restart needs: "
            + ", ".join(f"p{c.partition} (version {c.missing[0]})" for c in broken[:10]),
            icon="🚫",
        )


def _what_if_settings(provider: str, changelog: bool, inferred: int | None) -> tuple[int, bool]:
    """The settings the user tries (minDeltasForSnapshot, changelog checkpointing), beside
    the ones the files show now."""
    left, mid, right = st.columns(3)
    # It starts at today's setting, where the what-if must agree with "now".
    min_deltas = int(
        left.number_input(
            "minDeltasForSnapshot",
            0,
            10_000,
            inferred if inferred is not None else restart_cost.SPARK_DEFAULT_MIN_DELTAS,
            key="sg_restart_min_deltas",
            help="spark.sql.streaming.stateStore.minDeltasForSnapshot (Spark's default: 10)."
            + (f" The snapshots on disk suggest {inferred}." if inferred is not None else ""),
        )
    )
    alt_changelog = changelog
    if provider == "rocksdb":
        alt_changelog = mid.toggle(
            "changelog checkpointing",
            value=changelog,
            key="sg_restart_changelog",
            help="spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
        )
    else:
        mid.caption(
            "HDFS-backed stores always write deltas: changelog checkpointing is a RocksDB setting."
        )
    right.caption(
        f"Now: {md_code(provider)}, changelog checkpointing "
        f"{'on' if changelog else 'off'}"
        + (
            f", snapshots every ~{inferred + (1 if provider != 'rocksdb' else 0)} versions"
            if inferred is not None
            else ""
        )
    )
    return min_deltas, bool(alt_changelog)


def _compare(
    now: Sequence[restart_cost.PartitionCost],
    alt: Sequence[restart_cost.PartitionCost],
    label: str,
) -> None:
    """The restart now against the what-if: per partition, and the slowest of each."""
    now_frame, alt_frame = restart_cost.costs_frame(now), restart_cost.costs_frame(alt)
    st.plotly_chart(
        figures.restart_cost(now_frame, alt_frame, label), width="stretch", key="restart_cost"
    )
    worst, alt_worst = restart_cost.slowest(now), restart_cost.slowest(alt)
    if worst is not None and alt_worst is not None:
        st.caption(
            f"Slowest partition now: p{worst.partition}, {fmt_bytes(worst.bytes)} in "
            f"{worst.files} files, {worst.replays} replays. With {md(label)}: "
            f"p{alt_worst.partition}, {fmt_bytes(alt_worst.bytes)} in "
            f"{alt_worst.files} files, {alt_worst.replays} replays"
            + (" (sizes partly estimated)" if any(c.estimated for c in alt) else "")
            + "."
        )
    st.caption(md(restart_cost.ASSUMPTIONS))
    with st.expander("Per partition"):
        both = now_frame.merge(
            alt_frame[["partition_id", "base_version", "replays", "files", "bytes", "estimated"]],
            on="partition_id",
            suffixes=("", " (what if)"),
        )
        st.dataframe(both, hide_index=True)
