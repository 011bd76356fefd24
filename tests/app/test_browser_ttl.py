"""TTL expirations in a real browser (Debian's Chromium), on a transformWithState value state
with a TTL run here: Key history charts ``ttlExpirationMs`` on a date axis rather than as
``1.795825335T``, and Browse shows it as Spark's timestamp text, the raw long beside it."""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import pytest

from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.app.test_browser import CHROMIUM, TIMEOUT_MS, _open, chromium_tab, dashboard_server
from tests.app.ttl_query import STATE_VAR, ttl_query

pytestmark = [
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason="Debian's chromium is not installed (.ci/run installs it)",
    ),
    pytest.mark.spark,
]


@dataclass(frozen=True)
class Dashboard:
    url: str
    page: Any
    checkpoint: str


@pytest.fixture(scope="module")
def dashboard(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    base = tmp_path_factory.mktemp("ttl")
    cp = ttl_query(spark, base)
    db = Database(str(base / "h.duckdb"))
    root = scan_checkpoint(db, str(cp)).checkpoint
    with dashboard_server(db.path) as url, chromium_tab() as page:
        yield Dashboard(url, page, root)


def _at(d: Dashboard, page: str, **params: str) -> str:
    query = "&".join(
        f"{k}={quote(v, safe='')}" for k, v in {"checkpoint": d.checkpoint, **params}.items()
    )
    return f"{d.url}/{page}?{query}"


def test_key_history_charts_an_expiration_on_a_date_axis(dashboard: Dashboard) -> None:
    page = dashboard.page
    _open(page, _at(dashboard, "key-history", var=STATE_VAR))
    box = page.get_by_label("Key contains", exact=True)
    box.fill("k1")
    box.press("Enter")
    chart = page.locator(".js-plotly-plot", has_text="ttlExpirationMs").first
    chart.wait_for(timeout=TIMEOUT_MS)
    ticks = chart.locator("g.yaxislayer-above text").all_text_contents()
    assert ticks, chart.text_content()
    # Epoch milliseconds as a number axis read "1.795825335T"; a date axis reads times.
    assert not any(t.endswith("T") for t in ticks), ticks
    assert any(re.search(r"\d\d:\d\d", t) for t in ticks), ticks


def test_browse_shows_an_expiration_as_a_timestamp(dashboard: Dashboard) -> None:
    """The grid is drawn on a canvas; its "Download as CSV" button saves the cells the
    browser was sent, which is what the grid draws."""
    page = dashboard.page
    _open(page, _at(dashboard, "browse", var=STATE_VAR))
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.wait_for(timeout=TIMEOUT_MS)
    # Without the save-file dialog (which headless Chromium cannot answer) Streamlit falls
    # back to an ordinary download.
    page.evaluate("delete window.showSaveFilePicker")
    grid.hover()
    with page.expect_download(timeout=TIMEOUT_MS) as download:
        grid.get_by_label("Download as CSV").click()
    with open(download.value.path(), encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    assert rows
    for row in rows:
        shown, raw = row["value.ttlExpirationMs"], int(row["value.ttlExpirationMs (epoch ms)"])
        # Spark's rendering in the session time zone (UTC): no trailing zeros of a fraction.
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,3})?", shown), row
        at = datetime.fromisoformat(shown).replace(tzinfo=UTC)
        assert round(at.timestamp() * 1000) == raw, row
