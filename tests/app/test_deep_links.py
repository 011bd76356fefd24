"""Names you can tell apart in the picker, and a page's selection restored from its URL."""

from __future__ import annotations

import shutil
from urllib.parse import parse_qs

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app.dashboard.context import DB_ENV
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.app.test_pages_core import SAMPLES, TIMEOUT_S, _page, checkpoint_of

LONG_PREFIX = "mnt/lake/production/analytics-team"
# Below the part that tells two copies apart: the picker used to show its last three parts.
SHARED_TAIL = "streaming/ckpts/blockchain-dedup"


@pytest.fixture(scope="module")
def copies_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """Three copies of one sample under one long prefix, two with the same last component."""
    root = tmp_path_factory.mktemp("copies") / LONG_PREFIX
    paths = [root / "eu" / SHARED_TAIL, root / "us" / SHARED_TAIL, root / "orders"]
    db = Database(str(tmp_path_factory.mktemp("copies-db") / "copies.duckdb"))
    for path in paths:
        shutil.copytree(SAMPLES / "spark-4.3" / "dedup-hdfs", path)
        scan_checkpoint(db, str(path))
    return db.path, [str(p) for p in paths]


def _opened(page: str, **params: str) -> AppTest:
    """``page`` run as a pasted URL with ``params`` would open it; no exception."""
    at = AppTest.from_function(_page, args=(page,), default_timeout=TIMEOUT_S)
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_picker_tells_three_copies_apart(
    copies_db: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, paths = copies_db
    monkeypatch.setenv(DB_ENV, db)
    at = AppTest.from_function(_page, args=("query",), default_timeout=TIMEOUT_S)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    picker = at.sidebar.selectbox(key="sg_checkpoint_widget")
    shown = [str(o) for o in picker.options]
    assert len(set(shown)) == 3
    assert sorted(o.split(" ")[-1] for o in shown) == [
        f"eu/{SHARED_TAIL}",
        "orders",
        f"us/{SHARED_TAIL}",
    ]
    # The full path is under the picker, and in the URL.
    assert paths[0] in " ".join(c.value for c in at.sidebar.caption)
    assert at.query_params["checkpoint"] == paths[0]


def test_a_pasted_url_restores_the_state_page_at_a_store_and_batch(samples_db: str) -> None:
    cp = checkpoint_of("spark-4.3/join-hdfs")
    at = _opened("state", checkpoint=cp, operator="0", store="right-keyToNumValues", batch="5")
    assert at.sidebar.selectbox(key="sg_checkpoint_widget").value == cp
    assert at.sidebar.selectbox(key="sg_store_widget").value.endswith("/ right-keyToNumValues")
    labels = [m.label for m in at.metric]
    assert "keys at batch 5" in labels
    # The page writes back what it shows, so the address bar can be pasted again.
    assert at.query_params["batch"] == "5"
    assert at.query_params["store"] == "right-keyToNumValues"


def test_a_url_for_another_checkpoint_is_not_overridden_by_the_first(samples_db: str) -> None:
    cp = checkpoint_of("spark-4.3/agg-rocks")
    at = _opened("health", checkpoint=cp)
    assert at.sidebar.selectbox(key="sg_checkpoint_widget").value == cp


def test_overview_cards_link_to_health(samples_db: str) -> None:
    at = _opened("overview")
    links = [m.value for m in at.markdown if m.value.startswith("[Health →](health?checkpoint=")]
    assert len(links) >= 10


def test_a_browse_row_links_to_its_key_history(samples_db: str) -> None:
    cp = checkpoint_of("spark-4.3/agg-hdfs")
    at = _opened("browse", checkpoint=cp)
    link = str(at.dataframe[0].value["history"].iloc[0])
    page, _, query = link.partition("?")
    assert page == "key-history"
    params = {k: v[0] for k, v in parse_qs(query).items()}
    assert params["checkpoint"] == cp and params["store"] == "default" and params["key"]
    history = _opened("key_history", **params)
    assert not history.warning, [w.value for w in history.warning]
    assert any("present in" in c.value for c in history.caption)
    assert history.query_params["key"] == params["key"]


def test_a_finding_links_to_the_numbers_behind_it(samples_db: str) -> None:
    cp = checkpoint_of("demo/unbounded-state")
    at = _opened("health", checkpoint=cp)
    (leak,) = [w.value for w in at.warning if w.value.startswith("**Unbounded state**")]
    assert "See the numbers →](state?" in leak and "tab=Size" in leak
    link = leak.split("](", 1)[1].rstrip(")")
    params = {k: v[0] for k, v in parse_qs(link.partition("?")[2]).items()}
    state = _opened("state", **params)
    assert state.sidebar.selectbox(key="sg_store_widget").value.endswith("/ default")
    assert any(m.value.startswith("**") and "keys** at batch" in m.value for m in state.markdown)


def test_overview_filters_come_from_the_url(samples_db: str) -> None:
    at = _opened("overview", sg_overview_search="agg-rocks-cl")
    assert at.text_input(key="sg_overview_search").value == "agg-rocks-cl"
    assert any("Checkpoints 1–1 of 1 matching" in c.value for c in at.caption)
