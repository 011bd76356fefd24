"""State: one operator's store over its versions and partitions."""

from __future__ import annotations

import streamlit as st

from app import figures, queries
from app.dashboard import context
from app.escape import md, md_code

HEATMAPS = {"keys": "num_keys", "bytes written": "bytes"}


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


def _store(selection: context.StoreSelection) -> None:
    args = (selection.checkpoint, selection.operator_id, selection.store_name)
    st.caption(
        f"{md_code(selection.checkpoint)} · operator {selection.operator_id} "
        f"{md(selection.operator_name)} · store {md_code(selection.store_name)}"
    )
    with st.spinner("Reading state history…"):
        versions = context.load(queries.partition_cells, *args)
        usage = context.load(queries.disk_usage, *args)
        lag = context.load(queries.snapshot_lag, *args)
        skew = context.load(queries.partition_skew, *args)
        sst = context.load(queries.sst_reuse, *args)
    if versions.empty:
        st.info("No state versions collected for this store yet.")
        return
    newest = versions.sort_values("version").groupby("partition_id").last()
    cols = st.columns(6)
    cols[0].metric("partitions", f"{versions['partition_id'].nunique():,}")
    cols[1].metric(
        "versions", f"{int(versions['version'].min())}..{int(versions['version'].max())}"
    )
    cols[2].metric("keys now", f"{int(newest['num_keys'].fillna(0).sum()):,}")
    cols[3].metric(
        "on disk",
        context.human_bytes(usage["bytes"].sum()),
        help=", ".join(
            f"{r.kind}: {r.files} files, {context.human_bytes(r.bytes)}" for r in usage.itertuples()
        ),
    )
    last_skew = skew["skew"].dropna()
    cols[4].metric("skew now", "–" if last_skew.empty else f"{float(last_skew.iloc[-1]):.2f}×")
    cols[5].metric(
        "max replay",
        context.human_bytes(lag["replay_bytes"].max()),
        help="The most bytes one partition would read to restore its newest version.",
    )

    _chart(
        context.figure(figures.keys_over_versions, queries.partition_cells, *args),
        "Is the state growing without bound? Keys at each version (batch + 1): the sum over "
        "partitions, and each partition (with many partitions: the largest, and the min–max "
        "band).",
        "keys_over_versions",
    )
    with st.spinner("Drawing the partition × version heatmap…"):
        choice = st.radio("Heatmap of", list(HEATMAPS), horizontal=True, key="sg_state_heatmap")
        metric = HEATMAPS[str(choice)]
        _chart(
            context.figure(
                figures.partition_heatmap, queries.partition_cells, *args, metric=metric
            ),
            "Which partitions hold the state, and when did it land? One cell per partition and "
            "version: keys, or bytes written (delta or changelog plus snapshot or zip).",
            f"heatmap_{metric}",
        )
    left, right = st.columns(2)
    with left:
        _chart(
            context.figure(figures.skew_over_time, queries.partition_skew, *args),
            "Is one partition much bigger than the others? The largest partition's keys over "
            "the median's, per version: 1× is even; a high value means one task does most of "
            "the work.",
            "skew",
        )
    with right:
        _chart(
            context.figure(figures.key_changes, queries.state_growth, *args),
            "How much does each batch change? Keys added, updated and removed by each version's "
            "delta or changelog (removed drawn below zero).",
            "key_changes",
        )
    left, right = st.columns(2)
    with left:
        _chart(
            context.figure(figures.bytes_by_kind, queries.bytes_by_kind, *args),
            "What does each version write? Bytes per file kind (purged files included); SST "
            "files count at the version that uploaded them.",
            "bytes_by_kind",
        )
    with right:
        _chart(
            context.figure(figures.snapshot_lag, queries.snapshot_lag, *args),
            "How long would a restart take? Per partition at its newest version: versions "
            "since the last snapshot, and the bytes a cold load reads (snapshot plus deltas).",
            "snapshot_lag",
        )
    if not sst.empty:
        _chart(
            context.figure(figures.sst_upload_reuse, queries.sst_reuse, *args),
            "RocksDB: how much of each zip's SST data is new? Bytes uploaded with the version "
            "against bytes shared with the previous version's zip.",
            "sst_upload_reuse",
        )
    with st.expander("Bytes on disk now, by kind"):
        st.dataframe(
            usage.assign(size=[context.human_bytes(b) for b in usage["bytes"]]),
            hide_index=True,
        )
