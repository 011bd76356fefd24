"""The State page's growth attribution and restart cost on real samples."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from stateglass.app import queries
from stateglass.app.analysis import restart_cost
from stateglass.app.browse.growth import attribute_growth
from stateglass.app.escape import md
from stateglass.collectors.checkpoints.state_views import StateView
from tests.app.test_pages_core import TIMEOUT_S, _page, checkpoint_of


def _state_page(checkpoint: str) -> AppTest:
    at = AppTest.from_function(_page, args=("state",), default_timeout=TIMEOUT_S)
    at.session_state["sg_checkpoint"] = checkpoint_of(checkpoint)
    at.session_state["sg_store"] = "0 stateStoreSave / default"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_growth_and_restart_cost_on_the_state_page(samples_db: str) -> None:
    at = _state_page("spark-4.3/agg-hdfs")
    headers = [h.value for h in at.subheader]
    assert "Growth attribution: where do the new keys come from?" in headers
    assert "Restart cost: what a restart loads" in headers
    # The sentence is the attribution's own, over the default window of 10 versions.
    expected = attribute_growth(StateView(checkpoint_of("spark-4.3/agg-hdfs")), window=10)
    texts = " ".join(m.value for m in at.markdown)
    assert md(expected.sentence()) in texts
    (table,) = [d.value for d in at.dataframe if "new keys" in d.value.columns]
    assert list(table["new keys"]) == [c.keys for c in expected.contributors]
    # Restart cost metrics equal the model on the database's facts.
    cp = checkpoint_of("spark-4.3/agg-hdfs")
    now = restart_cost.current_cost(
        queries.live_state_files(samples_db, cp, 0, "default"),
        queries.restart_facts(samples_db, cp, 0, "default"),
    )
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["files (all partitions)"] == f"{sum(c.files for c in now):,}"
    worst = restart_cost.slowest(now)
    assert worst is not None and metrics["slowest partition"] == f"p{worst.partition}"
    # A smaller window and another minDeltasForSnapshot re-run without an error.
    at.select_slider(key="sg_growth_window").set_value(5).run()
    at.number_input(key="sg_restart_min_deltas").set_value(4).run()
    assert not at.exception, [e.value for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    assert "minDeltas 4" in captions and "estimated" in captions


def test_rocksdb_what_if_toggles_changelog(samples_db: str) -> None:
    at = _state_page("spark-4.3/agg-rocks")
    at.toggle(key="sg_restart_changelog").set_value(False).run()
    assert not at.exception, [e.value for e in at.exception]
    captions = " ".join(c.value for c in at.caption)
    assert "changelog off" in captions


def test_the_what_if_at_today_s_setting_is_now(samples_db: str) -> None:
    """The what-if starts at the setting the snapshots on disk show, and there it loads
    what a restart loads now (transformWithState's first commit writes a snapshot too)."""
    at = _state_page("spark-4.3/tws-rocks-cl")
    cp = checkpoint_of("spark-4.3/tws-rocks-cl")
    facts = queries.restart_facts(samples_db, cp, 0, "default")
    live = queries.live_state_files(samples_db, cp, 0, "default")
    inferred = restart_cost.inferred_min_deltas(facts, "rocksdb", True)
    assert at.number_input(key="sg_restart_min_deltas").value == inferred == 2
    now = restart_cost.current_cost(live, facts)
    alt = restart_cost.what_if(facts, "rocksdb", inferred, True)
    assert [(c.base_version, c.replays) for c in alt] == [(c.base_version, c.replays) for c in now]
    assert max(c.replays for c in now) == 1


def test_the_planner_offers_the_way_that_applies(samples_db: str) -> None:
    # HDFS: Spark refuses, the rewrite is offered; transformWithState on RocksDB: both apply.
    at = _state_page("spark-4.3/agg-hdfs")
    assert [b for b in at.button if b.key == "sg_plan_go"]
    (spark,) = [m.value for m in at.markdown if "does not apply" in m.value]
    assert "Spark 4.2+ repartition" in spark and "UNSUPPORTED" in spark
    (command,) = [c.value for c in at.code if "--partitions" in c.value]
    assert command.startswith("stateglass rewrite ") and command.endswith("--partitions 8")
    # The growth section's lead (a key value most new keys carry) gets its fix beside it.
    (fix,) = [e for e in at.expander if e.label.startswith("Plan a fix: Remove the keys with")]
    assert [c.value for c in fix.code if "--drop-keys 0/default" in c.value]
    tws = _state_page("spark-4.3/tws-rocks-cl")
    assert [b for b in tws.button if b.key == "sg_plan_go"]
    assert not [m.value for m in tws.markdown if "does not apply" in m.value]
    assert [c.value for c in tws.code if "_streamingCheckpointManager.repartition(" in c.value]
    assert [c.value for c in tws.code if c.value.endswith("--partitions 8")]
