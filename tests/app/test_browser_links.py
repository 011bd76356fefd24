"""Deep links in a real browser: a pasted URL restores a page; the State page's height (one
tab shown at a time)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from tests.app.test_browser import _charts_rendered, _open, page, server
from tests.app.test_pages_core import checkpoint_of

__all__ = ["page", "server"]  # the module-scoped fixtures of tests/app/test_browser.py

# The State page was 5,400 px tall with every section stacked; with one tab shown it must
# fit a few screens.
MAX_STATE_PAGE_PX = 3_000


def _main_height(page: Any) -> int:
    return int(
        page.evaluate(
            "() => document.querySelector('[data-testid=\"stMainBlockContainer\"]').scrollHeight"
        )
    )


def test_a_pasted_url_restores_the_state_page(page: Any, server: str) -> None:
    cp = checkpoint_of("spark-4.3/join-hdfs")
    query = {"checkpoint": cp, "operator": 0, "store": "right-keyToNumValues", "batch": 5}
    _open(page, f"{server}/state?{urlencode(query)}")
    _charts_rendered(page, 1)
    body = page.inner_text("body")
    assert "keys at batch 5" in body
    assert "right-keyToNumValues" in page.inner_text('[data-testid="stSidebar"]')
    # The address bar still holds the selection: it can be pasted again.
    assert "batch=5" in page.url and "store=right-keyToNumValues" in page.url


def test_the_state_page_fits_a_few_screens(page: Any, server: str) -> None:
    cp = checkpoint_of("spark-4.3/agg-hdfs")
    _open(page, f"{server}/state?{urlencode({'checkpoint': cp})}")
    _charts_rendered(page, 2)
    height = _main_height(page)
    print(f"State page height: {height} px")
    assert height < MAX_STATE_PAGE_PX
