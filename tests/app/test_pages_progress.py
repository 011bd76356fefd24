"""AppTest smoke tests of the progress charts (Query, State, Overview), on real queries'
progress events, and the one line each place shows without a progress source."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app import queries
from stateglass.app.dashboard.context import DB_ENV
from tests import progress_queries as pq
from tests.app.test_pages_core import TIMEOUT_S, _page, charts, checkpoint_of, run_page
from tests.progress_fixtures import collect_run


@pytest.fixture(scope="module")
def progress_db(
    tmp_path_factory: pytest.TempPathFactory, late_run: pq.Ran, compacting_run: pq.Ran
) -> Iterator[tuple[str, str, str]]:
    """A database with the ``late`` (HDFS) and ``compacting`` (RocksDB) runs and their events."""
    db = str(tmp_path_factory.mktemp("progress-pages") / "p.duckdb")
    late = collect_run(db, late_run)
    rocks = collect_run(db, compacting_run)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DB_ENV, db)
        yield db, late, rocks


def page(name: str, checkpoint: str, store: str | None = None) -> AppTest:
    at = AppTest.from_function(_page, args=(name,), default_timeout=TIMEOUT_S)
    at.session_state["sg_checkpoint"] = checkpoint
    if store:
        at.session_state["sg_store"] = store
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def chart_titles(at: AppTest) -> list[str]:
    titles = []
    for chart in at.get("plotly_chart"):
        layout = json.loads(chart.proto.spec)["layout"]
        title = layout.get("title", {})
        titles.append(title.get("text", "") if isinstance(title, dict) else str(title))
    return titles


def infos(at: AppTest) -> list[str]:
    return [i.value for i in at.info]


@pytest.mark.spark
def test_query_page_charts_the_progress(progress_db: tuple[str, str, str]) -> None:
    _, late, _ = progress_db
    at = page("query", late)
    titles = chart_titles(at)
    assert charts(at) == 4 + 3
    for title in (
        "Input rate against processing rate",
        "Batch duration breakdown (Spark's durationMs)",
        "Watermark and rows dropped as late",
    ):
        assert title in titles
    assert queries.NO_PROGRESS not in infos(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["rows dropped as late"] != "0"


@pytest.mark.spark
def test_state_page_charts_the_progress(progress_db: tuple[str, str, str]) -> None:
    _, _, rocks = progress_db
    at = page("state", rocks, "0 stateStoreSave / default")
    titles = chart_titles(at)
    for title in (
        "State memory against keys",
        "State store time per batch (summed over partitions)",
        "RocksDB internals",
        "Snapshot last uploaded (Spark) against the files",
    ):
        assert title in titles
    assert queries.NO_PROGRESS not in infos(at)


@pytest.mark.spark
def test_overview_cards_show_input_rate_and_lag_trend(
    progress_db: tuple[str, str, str],
) -> None:
    at = run_page("overview")
    text = " ".join(c.value for c in at.caption)
    assert text.count("lag trend: ") == 2
    assert "rows/s" in text


def test_without_progress_each_place_says_how_to_add_it(
    samples_db: str,
) -> None:
    # The samples' database (``samples_db`` points the pages at it for this test), whatever
    # another fixture of this module points them at.
    cp = checkpoint_of("spark-4.3/agg-hdfs")
    assert queries.NO_PROGRESS in infos(page("query", cp))
    assert queries.NO_PROGRESS in infos(page("state", cp, "0 stateStoreSave / default"))
    overview = " ".join(c.value for c in run_page("overview").caption)
    # Said once for the page, not on every card without events.
    assert overview.count("Input rate and lag trend: " + queries.NO_PROGRESS) == 1


def test_no_progress_line_names_the_option() -> None:
    assert "--progress PATH" in queries.NO_PROGRESS
    assert "\n" not in queries.NO_PROGRESS
