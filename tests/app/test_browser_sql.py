"""The SQL page in a real browser (Debian's Chromium through Playwright): type a query, see its
rows, download them as CSV, follow the Health page's state leak link, and be refused.

The server runs with a short per-query time limit, so the never-ending query stops quickly.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.dashboard.views.sql import TIME_LIMIT_ENV
from tests.app.test_browser import (
    CHROMIUM,
    TIMEOUT_MS,
    _open,
    _settle,
    chromium_tab,
    dashboard_server,
)
from tests.conftest import SamplesDb

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (.ci/run installs it)"
)

TIME_LIMIT_S = 3
# The hostile statements of the catalog's safety list, and what the one line says of each;
# none may write anything anywhere.
HOSTILE = [
    pytest.param("SELECT * FROM read_csv('/etc/passwd')", "refused", id="read-file"),
    pytest.param("COPY (SELECT 1) TO 'x.csv'", "refused", id="copy-to"),
    pytest.param("ATTACH 'x.duckdb' AS x", "refused", id="attach"),
    pytest.param("INSTALL httpfs", "refused", id="install"),
    pytest.param("SET memory_limit='100GB'", "locked", id="loosen-memory"),
    pytest.param("SET enable_external_access=true", "locked", id="external-access-on"),
    pytest.param(
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT max(n) FROM r",
        f"stopped at the time limit of {TIME_LIMIT_S}s",
        id="never-ending-cte",
    ),
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's working directory: where a relative ``COPY … TO`` would write."""
    return tmp_path_factory.mktemp("sql-server-cwd")


@pytest.fixture(scope="module")
def server(all_samples_db: SamplesDb, workdir: Path) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(TIME_LIMIT_ENV, str(TIME_LIMIT_S))
        mp.chdir(workdir)
        with dashboard_server(all_samples_db.path) as url:
            yield url


@pytest.fixture(scope="module")
def page(server: str) -> Iterator[Any]:
    with chromium_tab(height=1400) as tab:
        yield tab


def _run(page: Any, query: str) -> None:
    editor = page.get_by_role("textbox", name="Query")
    editor.fill(query)
    page.get_by_role("button", name="Run").click()
    # The URL takes the query when it runs.
    page.wait_for_function("() => location.search.includes('q=')", timeout=TIMEOUT_MS)
    _settle(page)


def _editor_holds(page: Any, text: str) -> None:
    """Wait for the editor to show ``text`` (a fresh page draws it on its first full run)."""
    page.wait_for_function(
        "(t) => [...document.querySelectorAll('textarea')].some(a => a.value.includes(t))",
        arg=text,
        timeout=TIMEOUT_MS,
    )


def _rows_caption(page: Any) -> str:
    loc = page.locator('[data-testid="stCaptionContainer"]', has_text="row(s)")
    loc.first.wait_for()
    return str(loc.first.inner_text())


def test_typing_a_query_shows_its_rows_and_downloads_them(
    page: Any, server: str, tmp_path: Path
) -> None:
    _open(page, f"{server}/sql")
    _run(page, "SELECT n, 'row ' || n AS label FROM range(3) AS t(n) ORDER BY n")
    assert "3 row(s)" in _rows_caption(page)
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download CSV", exact=True).click()
    target = tmp_path / "rows.csv"
    download.value.save_as(target)
    with target.open(newline="") as f:
        assert list(csv.DictReader(f)) == [{"n": str(n), "label": f"row {n}"} for n in range(3)]
    # A reload of the URL restores the query and its rows.
    page.reload()
    page.wait_for_selector('[data-testid="stApp"]')
    _settle(page)
    _editor_holds(page, "range(3)")
    assert "3 row(s)" in _rows_caption(page)


def test_a_batch_id_that_picks_no_batch_gets_a_note(page: Any, server: str) -> None:
    _open(page, f"{server}/sql")
    _run(page, "SELECT count(*) AS n FROM healthy.op0_default WHERE batch_id = 1.0")
    assert "1 row(s)" in _rows_caption(page)
    alert = page.locator('[data-testid="stAlert"]')
    alert.first.wait_for()
    # The note as its text, the table's name with it, no markup made of it.
    text = alert.first.locator('[data-testid="stMarkdownContainer"]').inner_text().strip()
    assert text.startswith("no batch was picked for healthy.op0_default (batch "), text
    assert text.endswith("(=, IN, BETWEEN)"), text


def test_the_health_page_links_to_the_keys_older_than_the_watermark(page: Any, server: str) -> None:
    _open(page, f"{server}/health")
    link = page.get_by_role("link", name="State leak: the keys older than the watermark")
    link.first.click()
    page.wait_for_url("**/sql?q=*", timeout=TIMEOUT_MS)
    _settle(page)
    _editor_holds(page, "older than the watermark")
    query = page.get_by_role("textbox", name="Query").input_value()
    assert "older than the watermark" in query and "epoch_ms" in query
    # It ran: Spark evicted every old key of the sample, so no row is left, and no error.
    assert "row(s)" in _rows_caption(page)
    assert page.locator('[data-testid="stAlert"]').count() == 0


@pytest.mark.parametrize(("query", "says"), HOSTILE)
def test_a_hostile_query_gets_one_line_and_writes_nothing(
    page: Any, server: str, workdir: Path, query: str, says: str
) -> None:
    _open(page, f"{server}/sql")
    _run(page, query)
    alert = page.locator('[data-testid="stAlert"]')
    alert.first.wait_for()
    assert alert.count() == 1
    # The message itself (the alert also holds its icon on a line of its own).
    text = alert.first.locator('[data-testid="stMarkdownContainer"]').inner_text().strip()
    assert "\n" not in text and "Traceback" not in text, text
    assert says in text, text
    assert page.locator('[data-testid="stException"]').count() == 0
    assert list(workdir.iterdir()) == []


def _pick_other_checkpoint(page: Any) -> None:
    """Choose, in the sidebar, a checkpoint other than the one shown."""
    picker = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
    before = picker.locator('input[role="combobox"]').input_value()
    picker.click()
    options = page.locator('[role="option"]')
    options.first.wait_for()
    other = next(
        options.nth(i) for i in range(options.count()) if options.nth(i).inner_text() != before
    )
    other.click()
    page.wait_for_function(
        '(b) => document.querySelector(\'[data-testid="stSidebar"] input[role="combobox"]\')'
        ".value !== b",
        arg=before,
        timeout=TIMEOUT_MS,
    )
    _settle(page)


def _nav(page: Any, title: str) -> None:
    """Go to another page by the sidebar's navigation, in the same browser session."""
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title).click()
    _settle(page)


def test_a_checkpoint_change_keeps_the_query_beside_its_rows(page: Any, server: str) -> None:
    _open(page, f"{server}/sql")
    query = "SELECT n FROM range(4) AS t(n)"
    _run(page, query)
    assert "4 row(s)" in _rows_caption(page)
    # Another checkpoint picked on another page, then back: the query and its rows both stay.
    _nav(page, "Health")
    _pick_other_checkpoint(page)
    _nav(page, "SQL")
    _editor_holds(page, "range(4)")
    assert page.get_by_role("textbox", name="Query").input_value() == query
    assert "4 row(s)" in _rows_caption(page)
    # Picked on this page too; and the URL holds the query shown, so a reload keeps both.
    _pick_other_checkpoint(page)
    assert page.get_by_role("textbox", name="Query").input_value() == query
    assert "4 row(s)" in _rows_caption(page)
    page.wait_for_function("() => location.search.includes('range')", timeout=TIMEOUT_MS)
