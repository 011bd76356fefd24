"""State: one operator's store over its versions and partitions."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from stateglass.app import figures, queries
from stateglass.app.dashboard import context, sql_link, url_state
from stateglass.app.dashboard.views import repartition_plan, state_forensics
from stateglass.app.escape import md, md_code
from stateglass.parsers.units import fmt_bytes

HEATMAPS = {"keys": "max_keys", "bytes written": "bytes"}


def _chart(fig: object, caption: str, key: str) -> None:
    st.plotly_chart(fig, width="stretch", key=key)
    st.caption(caption)


def render() -> None:
    st.title("State")
    selection = context.pick_store()
    if selection is None:
        return
    # One read-only connection for every query of the page (opened only on a cache miss).
    with queries.session(context.db_path()):
        _store(selection)


# One tab per question, each answering first (a number or a sentence), then the charts.
TABS = ("Size", "Spread", "Restart", "New keys", "Spark's metrics", "Eviction", "Repartition")


def _store(selection: context.StoreSelection) -> None:
    args = (selection.checkpoint, selection.operator_id, selection.store_name)
    st.caption(
        f"{md_code(selection.checkpoint)} · operator {selection.operator_id} "
        f"{md(selection.operator_name)} · store {md_code(selection.store_name)}"
    )
    with st.spinner("Reading state history…"):
        # The same arguments as the charts' unzoomed load, so the page reads its cells once.
        versions = context.load(queries.partition_cells, *args, None, None)
        usage = context.load(queries.disk_usage, *args)
        history = context.load(queries.store_history, *args)
    if versions.empty:
        url_state.keep(batch=None)
        st.info("No state versions collected for this store yet.")
        return
    version = _pick_batch(versions)
    rows = context.load(queries.variable_rows, *args)
    _headline(
        args, versions[versions["version"] <= version], usage, history, version, raw=not rows.empty
    )
    _rows_per_variable(rows)
    links = [
        url_state.markdown_link(
            f"Browse batch {version - 1} →",
            url_state.link(
                "browse",
                checkpoint=selection.checkpoint,
                operator=selection.operator_id,
                store=selection.store_name,
                batch=version - 1,
            ),
        ),
        url_state.markdown_link(
            "Health →", url_state.link("health", checkpoint=selection.checkpoint)
        ),
    ]
    st.markdown(" · ".join(links))
    size, spread, restart, new_keys, spark, eviction, repartition = st.tabs(
        TABS, key=url_state.TAB, bind="query-params"
    )
    with size:
        st.markdown(_size_answer(versions, version))
        st.caption(md(queries.history_note(history)))
        st.caption(md(context.load(queries.history_kept, selection.checkpoint)))
        sql_link.link(
            sql_link.store_history_query(*args), "This store's keys and bytes per batch, in SQL"
        )
        _growth_charts(args, history)
    with spread:
        st.markdown(_spread_answer(context.load(queries.partition_skew, *args), version))
        _layout_charts(args)
    with restart:
        state_forensics.render_restart_cost(selection)
    with new_keys:
        state_forensics.render_growth(selection)
    with spark:
        _progress(selection)
    with eviction:
        _eviction(selection)
    with repartition:
        repartition_plan.render(selection)
    with st.expander("Bytes on disk now, by kind"):
        st.dataframe(
            usage.assign(size=[fmt_bytes(b) for b in usage["bytes"]]),
            hide_index=True,
        )


def keys_at(versions: pd.DataFrame, version: int) -> int:
    """Keys in the store at ``version``: each partition's newest count at or before it."""
    upto = versions[versions["version"] <= version].sort_values("version")
    return int(upto.groupby("partition_id")["num_keys"].last().fillna(0).sum())


GROWTH_SPAN = 10


def _size_answer(versions: pd.DataFrame, version: int) -> str:
    """Is it growing? Keys at the batch, and how many more than ``GROWTH_SPAN`` batches before."""
    now = keys_at(versions, version)
    before = max(1, version - GROWTH_SPAN)
    change = now - keys_at(versions, before)
    return (
        f"**{now:,} keys** at batch {version - 1}: {change:+,} since batch {before - 1}. "
        "Keys that only grow, batch after batch, are state Spark never evicts."
    )


def _spread_answer(skew: pd.DataFrame, version: int) -> str:
    """Is it even? The largest partition against the median one at the batch."""
    upto = skew[skew["version"] <= version].dropna(subset=["skew"])
    if upto.empty:
        return "No batch has every partition known yet: skew is not drawn."
    last = upto.iloc[-1]
    return (
        f"**{float(last['skew']):.2f}×**: at batch {int(last['version']) - 1} the largest "
        f"partition holds {int(last['max_keys']):,} keys, the median one "
        f"{int(last['median_keys']):,} (1× is even)."
    )


def _pick_batch(versions: pd.DataFrame) -> int:
    """The version the headline is at: the newest, or the batch the URL or the user picks."""
    options = sorted(int(v) - 1 for v in versions["version"].unique())
    wanted = url_state.read_int(url_state.BATCH)
    remembered = st.session_state.get("sg_state_batch_value")
    start = wanted if wanted in options else remembered if remembered in options else None
    batch = int(
        st.select_slider(
            "At batch",
            options=options,
            value=options[-1] if start is None else start,
            # A new batch makes a new widget: one left at the newest follows the job.
            key=f"sg_state_batch:{options[-1]}",
            help="The batch the numbers below are at (Spark's batch id; its state version is "
            "the batch id + 1). The charts show every batch.",
        )
    )
    pinned = batch != options[-1]
    st.session_state["sg_state_batch_value"] = batch if pinned else None
    url_state.keep(batch=batch if pinned else None)
    return batch + 1


def _headline(
    args: tuple[str, int, str],
    versions: pd.DataFrame,
    usage: pd.DataFrame,
    history: dict[str, Any],
    version: int,
    *,
    raw: bool,
) -> None:
    """The store's numbers at a glance, at ``version``: partitions, keys, disk, skew, replay.

    ``raw``: the keys are RocksDB's, of every column family (a transformWithState store,
    whose rows per state variable follow)."""
    lag = context.load(queries.snapshot_lag, *args)
    skew = context.load(queries.partition_skew, *args)
    cols = st.columns(6)
    cols[0].metric("partitions", f"{versions['partition_id'].nunique():,}")
    # The range totals are drawn over (every partition known): what `stateglass info` and the
    # report say too.
    cols[1].metric(
        "versions",
        "–"
        if history.get("first_complete") is None
        else f"{history['first_complete']}..{history['last_complete']}",
        help="State versions where every partition is known (version V is batch V − 1's, as "
        "`stateglass info` and the report count them); totals and skew are drawn only there.",
    )
    cols[2].metric(
        f"raw RocksDB keys at batch {version - 1}" if raw else f"keys at batch {version - 1}",
        f"{keys_at(versions, version):,}",
        help="Keys stored in every column family: state variables, timers and their indexes "
        "(TTL, timestamp to key). Rows per state variable are below."
        if raw
        else None,
    )
    cols[3].metric(
        "on disk now",
        fmt_bytes(usage["bytes"].sum()),
        help=", ".join(
            f"{r.kind}: {r.files} files, {fmt_bytes(r.bytes)}" for r in usage.itertuples()
        ),
    )
    upto = skew[skew["version"] <= version]["skew"].dropna() if "version" in skew else skew["skew"]
    cols[4].metric("skew", "–" if upto.empty else f"{float(upto.iloc[-1]):.2f}×")
    cols[5].metric(
        "max replay now",
        fmt_bytes(lag["replay_bytes"].max()),
        help="The most bytes one partition would read to restore its newest version.",
    )


def _rows_per_variable(rows: pd.DataFrame) -> None:
    """A transformWithState store's rows per state variable, timers and TTL entries apart,
    as ``stateglass state --state-var`` / ``--read-timers`` return them."""
    if rows.empty:
        return
    line = queries.rows_line(rows)
    shown = rows[rows["role"] != "internal"].head(6)
    cols = st.columns(max(len(shown), 1))
    for col, r in zip(cols, shown.itertuples(), strict=False):
        label = "timers" if r.role == "timers" else str(r.column_family)
        col.metric(
            f"{md(label)} rows",
            f"{int(r.rows):,}",
            help=f"{r.kind or r.role}; {int(r.raw_keys):,} raw RocksDB keys",
        )
    st.caption(
        md(
            f"Rows as Spark's reader returns them ({line}), at version {int(rows['version'].max())}"
            " (batch "
            f"{int(rows['version'].max()) - 1}): a ListState is one row per element. Raw "
            "RocksDB keys per column family: "
            + ", ".join(f"{r.column_family} {int(r.raw_keys):,}" for r in rows.itertuples())
        )
    )


def _zoom(args: tuple[str, int, str]) -> tuple[int | None, int | None, str]:
    """The versions the heatmap and the key lines show: all of them, or a range picked with a
    slider when there are more than fit (a narrow range is fetched at full resolution)."""
    lo, hi = context.load(queries.version_span, *args)
    if hi - lo + 1 <= queries.HEATMAP_COLUMNS:
        return None, None, ""
    first, last = st.slider(
        "Versions shown", min_value=lo, max_value=hi, value=(lo, hi), key="sg_state_zoom"
    )
    picked = (None, None) if (first, last) == (lo, hi) else (first, last)
    width = context.load(queries.cell_grid, *args, *picked).width
    note = (
        ""
        if width <= 1
        else f" Downsampled: one column per {width:,} versions (the last count in each, the "
        "band and the keys heatmap at each bucket's minimum and maximum, so no spike is lost);"
        " narrow the range above to see single versions."
    )
    return (*picked, note)


def _growth_charts(args: tuple[str, int, str], history: dict[str, Any]) -> None:
    """Keys over versions, and where they sit: the partition × version heatmap."""
    first, last, note = _zoom(args)
    _chart(
        context.figure(
            figures.keys_over_versions,
            queries.partition_cells,
            *args,
            first,
            last,
            partitions=history.get("partitions_by_version") or history.get("partitions"),
        ),
        "Is the state growing without bound? Keys at each version (batch + 1): the sum over "
        "partitions (a gap where some partition is unknown), and each partition (with many "
        "partitions: the largest, and the min–max band)." + note,
        "keys_over_versions",
    )
    with st.spinner("Drawing the partition × version heatmap…"):
        choice = st.radio("Heatmap of", list(HEATMAPS), horizontal=True, key="sg_state_heatmap")
        metric = HEATMAPS[str(choice)]
        _chart(
            context.figure(
                figures.partition_heatmap,
                queries.partition_cells,
                *args,
                first,
                last,
                metric=metric,
            ),
            "Which partitions hold the state, and when did it land? One cell per partition and "
            "version: the most keys, or bytes written (delta or changelog plus snapshot or "
            "zip)." + note,
            f"heatmap_{metric}",
        )


def _layout_charts(args: tuple[str, int, str]) -> None:
    """How the state is spread and written: skew, key changes, bytes by kind, snapshot lag,
    and for RocksDB the SST reuse."""
    lo, hi = context.load(queries.version_span, *args)
    note = queries.downsample_note(hi - lo + 1)
    left, right = st.columns(2)
    with left:
        _chart(
            context.figure(figures.skew_over_time, queries.partition_skew, *args),
            "Is one partition much bigger than the others? The largest partition's keys over "
            "the median's, per version: 1× is even; a high value means one task does most of "
            "the work." + note,
            "skew",
        )
    with right:
        _chart(
            context.figure(figures.key_changes, queries.state_growth, *args),
            "How much does each batch change? Keys added, updated and removed by each version's "
            "delta or changelog (removed drawn below zero)." + note,
            "key_changes",
        )
    left, right = st.columns(2)
    with left:
        _chart(
            context.figure(figures.bytes_by_kind, queries.bytes_by_kind, *args),
            "What does each version write? Bytes per file kind (purged files included); SST "
            "files count at the version that uploaded them." + note,
            "bytes_by_kind",
        )
    with right:
        _chart(
            context.figure(figures.snapshot_lag, queries.snapshot_lag, *args),
            "How long would a restart take? Per partition at its newest version: versions "
            "since the last snapshot, and the bytes a cold load reads (snapshot plus deltas).",
            "snapshot_lag",
        )
    if not context.load(queries.sst_reuse, *args).empty:
        _chart(
            context.figure(figures.sst_upload_reuse, queries.sst_reuse, *args),
            "RocksDB: how much of each zip's SST data is new? Bytes uploaded with the version "
            "against bytes shared with the previous version's zip." + note,
            "sst_upload_reuse",
        )


# ---- what Spark reported: progress events of the store's operator ---------------------------


def _progress(selection: context.StoreSelection) -> None:
    st.subheader("What Spark reported (progress events)")
    op_args = (selection.checkpoint, selection.operator_id)
    state = context.load(queries.progress_state, *op_args)
    if state.empty:
        st.info(queries.NO_PROGRESS, icon="ℹ️")
        return
    left, right = st.columns(2)
    with left:
        _chart(
            context.figure(figures.memory_vs_keys, queries.progress_state, *op_args),
            "Does memory follow the keys? Spark's memoryUsedBytes of this operator against its "
            "numRowsTotal (summed over partitions); hover for bytes per key. Memory growing "
            "faster than keys means values grow per key.",
            "memory_vs_keys",
        )
    with right:
        _chart(
            context.figure(figures.commit_time, queries.progress_state, *op_args),
            "How long does the state store take each batch? commitTimeMs, allUpdatesTimeMs "
            "and allRemovalsTimeMs, summed over the operator's partitions.",
            "commit_time",
        )
    rocksdb = ("rocksdb_files_copied", "rocksdb_flush_latency_ms")
    if any(state[c].notna().any() for c in rocksdb):
        _chart(
            context.figure(figures.rocksdb_internals, queries.progress_state, *op_args),
            "RocksDB's own counters: files copied to the checkpoint against files reused, the "
            "latencies of each commit step (write stalls included), and the block-cache hit "
            "ratio.",
            "rocksdb_internals",
        )
    args = (selection.checkpoint, selection.operator_id, selection.store_name)
    uploads = context.load(queries.snapshot_uploads, *args)
    _chart(
        context.figure(figures.snapshot_uploads, queries.snapshot_uploads, *args),
        "Does Spark's SnapshotLastUploaded (Spark 4.x, per partition) match the snapshots on "
        "disk? Beside it, the newest snapshot (or zip) version the files show at the same "
        "state version.",
        "snapshot_uploads",
    )
    disagree = uploads[uploads["agree"].eq(False)]
    if not disagree.empty:
        st.warning(
            f"Spark's SnapshotLastUploaded and the files disagree for {len(disagree)} "
            "partition(s): "
            + ", ".join(
                f"p{int(r.partition_id)}: Spark {int(r.reported_version)}, files "
                f"{int(r.files_version)}"
                for r in disagree.itertuples()
            )
            + ". A snapshot Spark reports but the files lack was purged or lost; one the "
            "files have but Spark does not report was uploaded by another run or by hand.",
            icon="⚠️",
        )


# ---- the eviction audit: keys Spark should already have evicted -----------------------------


def _eviction(selection: context.StoreSelection) -> None:
    st.subheader("Eviction audit")
    args = (selection.checkpoint, selection.operator_id, selection.store_name)
    rules = context.load(queries.eviction_rules, *args)
    if rules.empty:
        st.info("Not audited yet: run `stateglass collect` again.", icon="ℹ️")
        return
    audit = context.load(queries.eviction_audit, *args)
    for rule in rules.itertuples():
        label = f" ({md_code(rule.state_var)})" if rule.state_var else ""
        if rule.kind == "never_evicted":
            st.warning(
                f"This state can never be evicted{label}: {md(rule.cause)}. "
                f"**Fix:** {md(rule.fix)}.",
                icon="⚠️",
            )
            continue
        if not rule.audited and rule.kind != "join_value":
            st.caption(f"Not audited{label}: {md(rule.cause or '')}.")
            continue
        mine = audit[audit["state_var"] == rule.state_var] if not audit.empty else audit
        st.caption(
            f"Spark evicts{label} when {md_code(rule.predicate)}, at the watermark of the batch "
            "that writes the version; keys still matching it are *overdue*. "
            + (
                "The join's time bound is not recorded in the checkpoint, so overdue values "
                "are not counted; the health rule checks that values are removed at all."
                if rule.kind == "join_value"
                else "Browse → **Overdue only** lists them."
            )
        )
        if mine.empty:
            continue
        if rule.audited:
            _chart(
                figures.overdue_keys(mine),
                "Keys Spark should already have evicted, per version (summed over partitions): "
                "zero for a healthy store.",
                f"overdue_keys_{rule.state_var}",
            )
        with st.expander("Audit per version"):
            st.dataframe(mine.drop(columns=["state_var"]), hide_index=True)
