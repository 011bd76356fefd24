"""The dashboard in a real browser: Debian's Chromium driven by Playwright.

One Streamlit server on the sample checkpoints' database, one headless browser for the module.
Every page visited is checked for Streamlit's exception box.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.report.pdf import BROWSER_FLAGS
from tests.conftest import SamplesDb

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = list(BROWSER_FLAGS)
MAIN = Path(__file__).resolve().parents[2] / "app" / "dashboard" / "main.py"
# Generous: CI machines are shared and Streamlit's first page load compiles a lot.
TIMEOUT_MS = 90_000

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (.ci/run installs it)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(all_samples_db: SamplesDb) -> Iterator[str]:
    with dashboard_server(all_samples_db.path) as url:
        yield url


@contextmanager
def dashboard_server(db: str) -> Iterator[str]:
    """``streamlit run`` of the dashboard on ``db``, on a free loopback port; its URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(MAIN),
            "--server.port",
            str(port),
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
            "--",
            "--db",
            db,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_serving(url, proc, lambda: proc.stderr.read().decode() if proc.stderr else "")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if proc.stderr:
            proc.stderr.close()


def wait_serving(
    url: str, proc: subprocess.Popen[bytes], output: Callable[[], str], timeout_s: float = 60
) -> None:
    """Wait for the dashboard's health check at ``url`` (as ``stateglass dashboard`` does);
    fail with ``output()`` if the process ends or the time runs out first."""
    from stateglass.app.dashboard.server import wait_until_serving
    from stateglass.app.errors import AppError

    try:
        wait_until_serving(proc, url, timeout_s)
    except AppError as exc:
        pytest.fail(f"{exc}: {output()[-2000:]}")


@contextmanager
def chromium_tab(height: int = 1000) -> Iterator[Any]:
    """One tab of Debian's headless Chromium, driven by Playwright; closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": height})
        tab = context.new_page()
        tab.set_default_timeout(TIMEOUT_MS)
        try:
            yield tab
        finally:
            context.close()
            browser.close()


@pytest.fixture(scope="module")
def page(server: str) -> Iterator[Any]:
    with chromium_tab() as tab:
        yield tab


def _open(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector('[data-testid="stApp"]')
    _settle(page)


# Streamlit's own end-to-end tests wait for this: the app says its script is not running, and
# no element is still the stale one of an earlier run (the frontend marks those).
SCRIPT_DONE = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return app !== null && app.getAttribute('data-test-script-state') === 'notRunning'
        && !document.querySelector('[data-testid="stStatusWidget"]')
        && !document.querySelector('[data-stale="true"]');
}"""


def _settle(page: Any) -> None:
    """Wait until Streamlit has finished running the script, then fail on an exception box."""
    page.wait_for_function(SCRIPT_DONE, timeout=TIMEOUT_MS)
    boxes = page.locator('[data-testid="stException"]')
    assert boxes.count() == 0, boxes.first.inner_text()


def _charts_rendered(page: Any, at_least: int) -> int:
    """Wait for ``at_least`` Plotly charts drawn (each has its own ``.main-svg`` layers)."""
    drawn = (
        "[...document.querySelectorAll('.js-plotly-plot')]"
        ".filter(p => p.querySelector('.main-svg')).length"
    )
    page.wait_for_function(f"() => {drawn} >= {at_least}", timeout=TIMEOUT_MS)
    return int(page.evaluate(f"() => {drawn}"))


def test_overview_renders_charts(page: Any, server: str) -> None:
    _open(page, f"{server}/")  # the default page
    assert _charts_rendered(page, 1) >= 1
    assert "agg-hdfs" in page.inner_text("body")


def test_query_page_renders_charts(page: Any, server: str) -> None:
    _open(page, f"{server}/query")
    assert _charts_rendered(page, 2) >= 2


def test_state_page_renders_charts(page: Any, server: str) -> None:
    _open(page, f"{server}/state")
    assert _charts_rendered(page, 3) >= 3


def _footer(page: Any) -> str:
    loc = page.locator('[data-testid="stCaptionContainer"]', has_text="Rows ")
    loc.first.wait_for()
    return str(loc.first.inner_text())


def test_moving_the_version_changes_the_table(page: Any, server: str) -> None:
    _open(page, f"{server}/browse")
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    before_text = _footer(page)
    before_pixels = page.locator('[data-testid="stDataFrame"]').first.screenshot()
    # Streamlit's slider is a react-aria range input, labelled "batch B · version V".
    thumb = page.locator('[data-testid="stSlider"] input[type="range"]').first
    before_value = thumb.get_attribute("aria-valuetext")
    assert before_value is not None and "batch" in before_value and "version" in before_value
    thumb.focus()
    for _ in range(3):
        page.keyboard.press("ArrowLeft")
    page.wait_for_function(
        '(v) => document.querySelector(\'[data-testid="stSlider"] input[type="range"]\')'
        ".getAttribute('aria-valuetext') !== v",
        arg=before_value,
    )
    _settle(page)
    page.wait_for_function(
        "(t) => [...document.querySelectorAll('[data-testid=\"stCaptionContainer\"]')]"
        ".some(e => e.innerText.startsWith('Rows ') && e.innerText !== t)",
        arg=before_text,
    )
    after_text = _footer(page)
    assert after_text != before_text
    assert "batch" in after_text
    after_pixels = page.locator('[data-testid="stDataFrame"]').first.screenshot()
    assert after_pixels != before_pixels


def test_opening_a_diff(page: Any, server: str) -> None:
    _open(page, f"{server}/diff")
    # Streamlit draws the metrics one by one as the script runs: wait for each, not the first.
    for kind in ("Keys added", "Keys removed", "Keys changed"):
        metric = page.locator('[data-testid="stMetric"]', has_text=kind)
        metric.first.wait_for(timeout=TIMEOUT_MS)
    assert page.locator('[data-testid="stTab"]').count() >= 3
