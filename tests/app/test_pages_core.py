"""AppTest smoke tests of the Overview, Query and State pages on the sample checkpoints."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app import allowed
from stateglass.app.escape import md
from stateglass.collectors.db.read import read_query
from tests.conftest import SAMPLES

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "dashboard" / "main.py")
TIMEOUT_S = 60
FORENSIC_CHARTS = 3  # state forensics: growth shares, growth per version, restart cost


def _page(name: str) -> None:
    """The page as main.py runs it, without the navigation: one page per AppTest."""
    import importlib

    from stateglass.app.dashboard import context

    context.live_status()
    importlib.import_module(f"stateglass.app.dashboard.views.{name}").render()


def run_page(name: str) -> AppTest:
    at = AppTest.from_function(_page, args=(name,), default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def charts(at: AppTest) -> int:
    return len(at.get("plotly_chart"))


def checkpoint_of(name: str) -> str:
    return str(SAMPLES / name)


def test_main_script_shows_overview_and_last_update(samples_db: str) -> None:
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Overview"]
    sidebar = " ".join(c.value for c in at.sidebar.caption)
    assert "Data last updated" in sidebar and samples_db in sidebar


def test_overview_has_a_card_per_checkpoint(samples_db: str) -> None:
    at = run_page("overview")
    (count,) = read_query(samples_db, "SELECT count(*) FROM checkpoints")[0]
    assert count >= 10
    # One sparkline per checkpoint, and each card names its query id.
    assert charts(at) == count
    text = " ".join(str(c.value) for c in at.caption)
    for (query_id,) in read_query(samples_db, "SELECT query_id FROM checkpoints"):
        assert query_id in text
    assert f"{count} checkpoint(s) in the database" in text


def test_overview_rejects_a_path_that_is_not_a_checkpoint(
    samples_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Inside the allowed roots the error may say what is there (tests/app/test_watch_box.py).
    monkeypatch.setenv(allowed.ALLOWED_ENV, allowed.encode([str(tmp_path)]))
    at = run_page("overview")
    at.text_input(key="sg_watch_path").input(str(tmp_path))
    at.button[0].click().run()
    assert not at.exception
    (error,) = at.error
    # Shown as plain text: the path is Markdown-escaped (app/escape.py).
    assert md(str(tmp_path)) in error.value and "\n" not in error.value
    assert "not a Structured Streaming checkpoint" in error.value


def test_a_commit_between_two_runs_keeps_the_submitted_watch(
    samples_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collector commits while the user types a path: the Watch they submit is handled,
    not dropped by the live check's rerun (only the check's own timer re-runs the page)."""
    monkeypatch.setenv(allowed.ALLOWED_ENV, allowed.encode([str(tmp_path)]))
    at = run_page("overview")
    before = os.stat(samples_db)
    later = before.st_mtime + 5
    try:
        os.utime(samples_db, (later, later))  # what a collector's commit does to the file
        at.text_input(key="sg_watch_path").input(str(tmp_path))
        at.button[0].click().run()
    finally:
        os.utime(samples_db, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert not at.exception, [e.value for e in at.exception]
    (error,) = at.error
    assert "not a Structured Streaming checkpoint" in error.value


def test_overview_watches_a_new_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Watch starts a child collector; the card appears once its first scan lands."""
    from stateglass.app.dashboard.views.overview import _registry

    db = str(tmp_path / "fresh.duckdb")
    monkeypatch.setenv("STATEGLASS_DB", db)
    monkeypatch.delenv("STATEGLASS_WATCHED", raising=False)
    monkeypatch.setenv(allowed.ALLOWED_ENV, allowed.encode([str(SAMPLES)]))
    target = checkpoint_of("spark-4.3/dedup-hdfs")
    at = run_page("overview")
    try:
        at.text_input(key="sg_watch_path").input(target)
        at.button[0].click().run()
        assert not at.exception, [e.value for e in at.exception]
        assert _registry(db).watched() == {target}
        deadline = time.monotonic() + 60
        while not os.path.exists(db) or not read_query(db, "SELECT * FROM checkpoints"):
            assert time.monotonic() < deadline, "the watcher never collected"
            time.sleep(0.2)
        at.run()
        assert charts(at) == 1
        # A second Watch of the same path starts nothing.
        at.text_input(key="sg_watch_path").input(target)
        at.button[0].click().run()
        assert any("Already watching" in i.value for i in at.info)
    finally:
        _registry(db).stop_all()
    assert _registry(db).watched() == set()


@pytest.mark.parametrize(
    "checkpoint",
    [
        pytest.param("spark-4.3/agg-hdfs", id="4.3-agg-hdfs"),
        pytest.param("spark-3.5/agg-rocks", id="3.5-agg-rocks"),
        pytest.param("spark-4.3/session-rocks-cl", id="4.3-session-rocks-cl"),
        pytest.param("spark-4.2/repart-agg-up-cl", id="4.2-repartitioned"),
    ],
)
def test_query_page(samples_db: str, checkpoint: str) -> None:
    at = AppTest.from_function(_page, args=("query",), default_timeout=TIMEOUT_S)
    at.session_state["sg_checkpoint"] = checkpoint_of(checkpoint)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="sg_checkpoint_widget").value == checkpoint_of(checkpoint)
    assert charts(at) == 4
    (batches,) = read_query(
        samples_db, "SELECT count(*) FROM batches WHERE checkpoint = ?", [checkpoint_of(checkpoint)]
    )[0]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["batches"] == f"{batches:,}"
    assert metrics["pending"] == "0"
    notes = [i.value for i in at.info if "is a repartition" in i.value]
    if "repart" in checkpoint:
        assert notes == [
            "Batch 3 is a repartition: Spark moved the state from 3 to 5 partitions "
            "(spark._streamingCheckpointManager.repartition, Spark 4.2+); it read no input."
        ]
    else:
        assert notes == []


@pytest.mark.parametrize(
    ("checkpoint", "store", "rocksdb"),
    [
        pytest.param("spark-4.3/agg-hdfs", "0 stateStoreSave / default", False, id="hdfs"),
        pytest.param("spark-4.3/agg-rocks", "0 stateStoreSave / default", True, id="rocksdb"),
        pytest.param(
            "spark-4.3/join-hdfs",
            "0 symmetricHashJoin / right-keyWithIndexToValue",
            False,
            id="join-store",
        ),
    ],
)
def test_state_page(samples_db: str, checkpoint: str, store: str, rocksdb: bool) -> None:
    at = AppTest.from_function(_page, args=("state",), default_timeout=TIMEOUT_S)
    at.session_state["sg_checkpoint"] = checkpoint_of(checkpoint)
    at.session_state["sg_store"] = store
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="sg_store_widget").value == store
    op, name_store = store.split(" ", 1)
    store_name = name_store.split(" / ")[1]
    # The eviction audit: one chart of overdue keys per audited store.
    (audited,) = read_query(
        samples_db,
        "SELECT count(*) FROM eviction_rules WHERE checkpoint = ? AND operator_id = ? "
        "AND store_name = ? AND audited",
        [checkpoint_of(checkpoint), int(op), store_name],
    )[0]
    # keys, heatmap, skew, key changes, bytes by kind, snapshot lag (+ SST for RocksDB),
    # the forensics' growth shares, growth per version and restart cost, and the eviction audit.
    assert charts(at) == 6 + rocksdb + FORENSIC_CHARTS + audited
    (partitions,) = read_query(
        samples_db,
        "SELECT count(DISTINCT partition_id) FROM state_versions WHERE checkpoint = ? "
        "AND operator_id = ? AND store_name = ?",
        [checkpoint_of(checkpoint), int(op), store_name],
    )[0]
    assert {m.label: m.value for m in at.metric}["partitions"] == str(partitions)
    # Every chart has a caption saying what it answers.
    assert sum(c.value.endswith((".", ")")) for c in at.caption) >= charts(at)
    # The heatmap switches to bytes without an error.
    at.radio(key="sg_state_heatmap").set_value("bytes written").run()
    assert not at.exception
    assert charts(at) == 6 + rocksdb + FORENSIC_CHARTS + audited


def test_state_page_plans_a_repartition(samples_db: str) -> None:
    """The planner section reads the store only when asked, then shows the plan (an HDFS
    checkpoint is not offered one: tests/app/test_pages_forensics.py)."""
    at = AppTest.from_function(_page, args=("state",), default_timeout=TIMEOUT_S)
    at.session_state["sg_checkpoint"] = checkpoint_of("spark-4.3/agg-rocks")
    at.session_state["sg_store"] = "0 stateStoreSave / default"
    at.run()
    before = charts(at)
    at.number_input(key="sg_plan_partitions").set_value(5)
    at.button(key="sg_plan_go").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert charts(at) == before + 1
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["rewrite time (estimate)"].endswith(" s")
    assert metrics["slowest restart after"].startswith("p")


def test_pages_without_a_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATEGLASS_DB", str(tmp_path / "none.duckdb"))
    for name in ("overview", "query", "state"):
        at = run_page(name)
        assert at.info, name
    assert not (tmp_path / "none.duckdb").exists()
