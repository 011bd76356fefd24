"""AppTest smoke tests of the Browse, Diff and Key history pages on the sample checkpoints."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app.browse.diff import compute_diff
from stateglass.app.browse.table import PageRequest, read_page
from stateglass.app.dashboard.context import DB_ENV
from stateglass.app.dashboard.state_ui import batch_label
from stateglass.app.escape import md
from stateglass.collectors.checkpoints.state_views import StateView
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import SAMPLES

TIMEOUT_S = 60
AGG = str(SAMPLES / "spark-4.3" / "agg-hdfs")
TWS = str(SAMPLES / "spark-4.3" / "tws-rocks-cl")


def _page(name: str) -> None:
    import importlib

    importlib.import_module(f"stateglass.app.dashboard.views.{name}").render()


def open_page(name: str, checkpoint: str) -> AppTest:
    """The page with ``checkpoint`` picked in the sidebar."""
    at = AppTest.from_function(_page, args=(name,), default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.sidebar.selectbox(key="sg_checkpoint_widget").select(checkpoint).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def captions(at: AppTest) -> str:
    return " ".join(str(c.value) for c in at.caption)


def partition(at: AppTest) -> Any:
    return next(s for s in at.selectbox if s.label == "Partition")


def test_browse_moves_through_versions(samples_db: str) -> None:
    at = open_page("browse", AGG)
    slider = at.select_slider[0]
    assert slider.value == 12 and slider.format_func(12) == "batch 11 · version 12"
    (table,) = at.dataframe
    expected = read_page(PageRequest(StateView(AGG), 12, page_size=50)).table
    assert len(table.value) == expected.num_rows == 14
    assert list(table.value["key.grp"].fillna("")) == [
        g or "" for g in expected["key.grp"].to_pylist()
    ]
    assert "of **14**" in captions(at) and batch_label(12) in captions(at)

    slider.set_value(3).run()
    assert not at.exception
    (table,) = at.dataframe
    at3 = read_page(PageRequest(StateView(AGG), 3, page_size=50))
    assert len(table.value) == at3.total != 14
    assert f"of **{at3.total}**" in captions(at) and "batch 2 · version 3" in captions(at)


def test_browse_searches_filters_and_pages(samples_db: str) -> None:
    at = open_page("browse", AGG)
    at.text_input(key="sg_browse_search").input("GAMMA").run()
    (table,) = at.dataframe
    assert len(table.value) > 0
    assert all(g == "gamma" for g in table.value["key.grp"])
    at.text_input(key="sg_browse_search").input("").run()
    partition(at).select(2).run()
    (table,) = at.dataframe
    assert set(table.value["partition_id"]) == {2}
    # Page 2 of the 14 rows at 50 a page: past the end, said so, no exception.
    partition(at).select("All").run()
    at.number_input(key="sg_browse_page").set_value(2).run()
    assert not at.exception
    assert any("only 1 page" in w.value for w in at.warning)


def test_browse_picks_a_state_variable(samples_db: str) -> None:
    at = open_page("browse", TWS)
    var = at.sidebar.selectbox(key="sg_state_var_widget")
    assert var.options == ["stats", "by_kind", "recent", "registered timers"]
    var.select("by_kind").run()
    (table,) = at.dataframe
    assert "user_map_key.kind" in table.value.columns
    # Elements belong to the run that made them: take the widget again after each run.
    at.sidebar.selectbox(key="sg_state_var_widget").select("registered timers").run()
    (table,) = at.dataframe
    assert "expiration_timestamp_ms" in table.value.columns
    # Epoch milliseconds by Spark's contract: the timestamp Spark shows, the raw long beside.
    first = table.value.iloc[0]
    assert first["expiration_timestamp_ms"] == "2024-01-01 00:54:46"
    assert first["expiration_timestamp_ms (epoch ms)"] == 1704070486000


def test_diff_counts_and_tables(samples_db: str) -> None:
    at = open_page("diff", AGG)
    (slider,) = at.select_slider
    assert slider.value == (11, 12)
    counts = compute_diff(StateView(AGG), 11, 12).counts
    assert [m.value for m in at.metric] == [
        f"{counts[k]:,}" for k in ("added", "removed", "changed")
    ]
    tables = at.dataframe
    assert len(tables) == 2  # removed and changed; "added" is empty at these versions
    assert len(tables[0].value) == counts["removed"]
    assert set(tables[1].value["key"].str.startswith("{")) == {True}

    slider.set_value((2, 6)).run()
    assert not at.exception
    last_two, counts = counts, compute_diff(StateView(AGG), 2, 6).counts
    assert counts != last_two
    assert [m.value for m in at.metric] == [
        f"{counts[k]:,}" for k in ("added", "removed", "changed")
    ]
    assert "batch 1 · version 2 → batch 5 · version 6" in [s.value for s in at.subheader]


def test_key_history_of_a_searched_key(samples_db: str) -> None:
    at = open_page("key_history", AGG)
    at.text_input(key="sg_history_search").input("gamma").run()
    assert not at.exception
    (table,) = at.dataframe
    # Versions 1..10 without the key are one row (collapse_absent), then 11 and 12.
    assert list(table.value["version"]) == [1, 11, 12]
    assert table.value["status"].iloc[0] == "absent in versions 1..10"
    assert len(at.get("plotly_chart")) == 1
    at.radio(key="sg_history_how").set_value("pasted as JSON").run()
    at.text_area(key="sg_history_json").input('{"grp": "nobody"}').run()
    assert not at.exception
    assert any("No retained version" in w.value for w in at.warning)


def test_pages_show_a_corrupt_file_as_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "agg-hdfs"
    shutil.copytree(AGG, copy)
    db = str(tmp_path / "bad.duckdb")
    scan_checkpoint(Database(db), str(copy))
    monkeypatch.setenv(DB_ENV, db)
    delta = copy / "state" / "0" / "1" / "11.delta"
    delta.write_bytes(delta.read_bytes()[:20])
    at = AppTest.from_function(_page, args=("browse",), default_timeout=TIMEOUT_S)
    at.run()
    at.select_slider[0].set_value(11).run()
    assert not at.exception
    (error,) = at.error
    assert md(str(delta)) in error.value and "\n" not in error.value


def test_key_history_finds_an_evicted_key_with_its_removal_batch(samples_db: str) -> None:
    """The 00:00 window of the watermarked aggregation was evicted at batch 5: no key at the
    newest batch holds it, the search goes back to the newest version that does."""
    at = open_page("key_history", str(SAMPLES / "spark-4.3" / "agg-hdfs"))
    at.text_input(key="sg_history_search").input("T00:00:00.000Z").run()
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(i.value for i in at.info)
    assert "No key at batch 11 · version 12 contains" in said
    assert "batch 4 · version 5, the newest retained version that holds one" in said
    assert any(
        "Removed at batch 5 (version 6)" in m.value or "removed at batch 5 (version 6)" in m.value
        for m in at.markdown
    )
    (table,) = at.dataframe
    assert "removed" in list(table.value["status"])


def test_key_history_hints_at_pasting_json_when_nothing_matches(samples_db: str) -> None:
    at = open_page("key_history", AGG)
    at.text_input(key="sg_history_search").input("no such key anywhere").run()
    assert not at.exception
    said = " ".join(i.value for i in at.info)
    assert "No retained version" in said and "pasted as JSON" in said
