"""The State page's repartition planner: the selected store under another partition count.

Reads the store's state at the last committed batch (only when asked: it reads every key),
and shows what ``stateglass plan-partitions`` prints: keys per partition now and planned,
skew, the slowest restart and the estimated rewrite time, and the ways to carry it out
(Spark's repartition, ``stateglass rewrite``) with their commands or reasons to refuse; not
offered where neither applies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from stateglass.app import figures, queries
from stateglass.app.analysis.errors import AnalysisError
from stateglass.app.dashboard import context
from stateglass.app.escape import md
from stateglass.collectors.errors import CollectorError
from stateglass.parsers.units import fmt_bytes

# The planner reads every key, only after its button: the page imports it (the checkpoint and
# store readers, the health thresholds) only then.
if TYPE_CHECKING:
    from stateglass.app.analysis.repartition.plan import Plan, StorePlan
    from stateglass.app.analysis.rewrite_refusals import RepartitionWay


@st.cache_data(ttl=600, max_entries=32, show_spinner=False)
def _plan(checkpoint: str, operator_id: int, store_name: str, n: int, stamp: int | None) -> Plan:
    # ``stamp`` (the last committed batch) is only part of the key: a new batch replans.
    from stateglass.app.analysis.repartition.plan import plan_partitions
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

    cp = Checkpoint.open(checkpoint)
    return plan_partitions(cp, n, operator_id=operator_id, store_name=store_name)


@st.cache_data(ttl=60, max_entries=64, show_spinner=False)
def _ways(
    checkpoint: str, n: int, spark_refusal: str | None
) -> tuple[RepartitionWay, RepartitionWay]:
    # The logs and operator metadata only, never the state; short-lived, as a batch in
    # flight comes and goes.
    from stateglass.app.analysis.rewrite_refusals import repartition_ways
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

    return repartition_ways(Checkpoint.open(checkpoint), n, spark_refusal)


def render(selection: context.StoreSelection) -> None:
    """The planner section: a partition count, the ways to carry it out, a button, the plan."""
    st.subheader("Repartition planner: what N partitions would hold")
    left, right = st.columns([1, 3])
    n = int(left.number_input("partitions", 1, 100_000, 8, key="sg_plan_partitions"))
    try:
        ways = _ways(selection.checkpoint, n, provider_refusal(selection.checkpoint))
    except (AnalysisError, CollectorError) as exc:
        st.error(md(str(exc)), icon="🚫")
        return
    if all(way.refusal for way in ways):
        # Said before any click: nothing can carry out any N.
        st.info(md("Not offered: " + " ".join(f"{w.tool}: {w.refusal}." for w in ways)), icon="ℹ️")
        return
    _ways_section(ways)
    if not right.button("Plan", key="sg_plan_go"):
        return
    from stateglass.app.analysis.repartition.plan import REWRITE_MODEL
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

    try:
        stamp = Checkpoint.open(selection.checkpoint).last_committed_batch
        with st.spinner("Reading every key of the store…"):
            plan = _plan(
                selection.checkpoint, selection.operator_id, selection.store_name, n, stamp
            )
    except (AnalysisError, CollectorError) as exc:
        st.error(md(str(exc)), icon="🚫")
        return
    for where, why in plan.refusals:
        st.warning(md(f"Spark would refuse to repartition ({where}): {why}"), icon="⚠️")
    for store in plan.stores:
        _store_plan(plan, store)
    slow = plan.slowest_restart
    cols = st.columns(2)
    if slow is not None:
        cols[0].metric(
            "slowest restart after",
            f"p{slow.partition}",
            help=f"about {fmt_bytes(slow.bytes)} on disk: the one snapshot the "
            "rewrite writes (estimated from the bytes on disk per stored byte now)",
        )
    cols[1].metric(
        "rewrite time (estimate)",
        f"{plan.rewrite_seconds:.0f} s",
        help=f"{REWRITE_MODEL.overhead_s:g} s + {REWRITE_MODEL.bytes_per_s / 1e6:.1f} MB/s of "
        f"stored state: {REWRITE_MODEL.basis}",
    )


def _ways_section(ways: tuple[RepartitionWay, RepartitionWay]) -> None:
    st.caption(
        "The plan sends every key of the last committed batch where Spark's hash sends it, "
        "as both ways below do. Spark 4.2+'s repartition changes the checkpoint in place "
        "(RocksDB provider only); stateglass rewrite writes a new checkpoint beside it, on "
        "either provider, and prints its plan until given --apply. Stop the query first."
    )
    for way in ways:
        if way.refusal:
            st.markdown(md(f"**{way.tool}**: does not apply: {way.refusal}"))
        else:
            st.markdown(md(f"**{way.tool}**:"))
            st.code(way.command, language="python" if way.tool.startswith("Spark") else "bash")


def provider_refusal(checkpoint: str) -> str | None:
    """Why Spark cannot repartition ``checkpoint`` at all, from the providers collected;
    None when it may (what N partitions would hold is then the plan's to say)."""
    from stateglass.app.analysis.repartition.keys import unsupported_provider

    providers = set(context.load(queries.stores, checkpoint)["provider"].dropna().astype(str))
    if "hdfs" in providers:
        return f"a store uses the HDFS state store provider, and {unsupported_provider()}"
    return None


def _store_plan(plan: Plan, store: StorePlan) -> None:
    st.markdown(
        md(
            f"**{store.label}** ({store.operator_name}, hashes the {store.rule}): skew "
            f"{_ratio(store.current_skew)} now → {_ratio(store.skew)} with {plan.partitions}"
        )
    )
    now = f"now ({plan.current_partitions})"
    planned = f"planned ({plan.partitions})"
    frame = pd.concat(
        [
            pd.DataFrame(
                {
                    "layout": now,
                    "partition_id": range(len(store.current_keys)),
                    "keys": store.current_keys,
                }
            ),
            pd.DataFrame(
                {"layout": planned, "partition_id": range(len(store.keys)), "keys": store.keys}
            ),
        ]
    )
    if store.warning:
        st.warning(md(store.warning), icon="⚠️")
    st.plotly_chart(figures.partition_plan(frame), width="stretch", key=f"plan_{store.label}")
    with st.expander("Planned partitions"):
        st.dataframe(
            pd.DataFrame(
                {"partition": range(len(store.keys)), "keys": store.keys, "bytes": store.bytes}
            ),
            hide_index=True,
        )


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}×"
