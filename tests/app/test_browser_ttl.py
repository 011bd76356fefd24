"""TTL expirations in a real browser (Debian's Chromium): Key history charts the
``ttlExpirationMs`` of a transformWithState value state with a TTL, run here, on a date axis
rather than as ``1.795825335T``."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
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
