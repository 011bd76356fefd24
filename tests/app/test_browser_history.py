"""The State page on a month of history, in real Chromium: its charts draw, with no error.

A month (259,200 versions of 200 partitions) takes long to build, so this is a benchmark
test (``make bench-tests``): it opens the biggest history database
``benchmarks/bench_history.py`` has cached (building a day's when there is none).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.test_browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    TIMEOUT_MS,
    _charts_rendered,
    _open,
    dashboard_server,
)

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

pytestmark = [
    pytest.mark.benchmark,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]


def _history_db() -> str:
    """The longest cached history (a month, a week or a day), a day built when none is."""
    sys.path.insert(0, str(BENCHMARKS))
    import bench_history

    for days in (30, 7, 1):
        db, _ = bench_history.paths(days, 200)
        if db.is_file():
            return str(db)
    return str(bench_history.build(1, 200))


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with dashboard_server(_history_db()) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        tab = context.new_page()
        tab.set_default_timeout(TIMEOUT_MS)
        tab.base_url = url  # type: ignore[attr-defined]
        yield tab
        context.close()
        browser.close()


def test_state_page_on_long_history_draws_its_charts(page: Any) -> None:
    _open(page, f"{page.base_url}/state")  # fails on Streamlit's exception box
    assert _charts_rendered(page, 5) >= 5
    body = page.inner_text("body")
    # Streamlit's message-size error, had the charts been too big to send.
    assert "exceeds the message size limit" not in body.lower()
    assert "MessageSizeError" not in body
    assert "Downsampled" in body
    assert "Kept:" in body
