"""The HTML report of every sample checkpoint, opened in headless Chromium.

Every chart must render (a ``.js-plotly-plot`` with its ``.main-svg``), as many as the report
says it has; opening it must make no network request and log no console error.

Parsing the inlined plotly.js takes the browser a second or more per page, so the reports
are opened all at once, each as soon as it is written, while Python renders the next one;
then each test checks one of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from stateglass.app.report import render_html
from stateglass.app.report.pdf import BROWSER_FLAGS
from tests.conftest import sample_id
from tests.e2e.oracle import format_samples
from tests.report.conftest import report_now

CHROMIUM = "/usr/bin/chromium"
LOCAL_SCHEMES = ("file:", "data:", "blob:")
RENDERED_CHARTS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .filter(el => el.querySelector('.main-svg') !== null).length"""


@dataclass
class Opened:
    """What the browser saw of one report."""

    text: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    claimed: int = -1
    rendered: int = -1
    title: str = ""
    failure: str = ""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium package")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=list(BROWSER_FLAGS))
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def opened(
    browser: Any, report_db: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Opened]:
    folder = tmp_path_factory.mktemp("reports")
    loading = []
    for checkpoint in format_samples():
        seen = Opened(render_html(report_db, checkpoint, now=report_now(report_db, checkpoint)))
        page_file = folder / (sample_id(checkpoint).replace("/", "-") + ".html")
        page_file.write_text(seen.text, encoding="utf-8")
        # A context per report: no cache or storage shared between them.
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        page = context.new_page()
        page.on("request", lambda r, s=seen: s.requests.append(r.url))
        page.on("console", lambda m, s=seen: s.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e, s=seen: s.errors.append(str(e)))
        page.goto(page_file.as_uri(), wait_until="commit")
        loading.append((checkpoint, seen, context, page))
    results = {}
    for checkpoint, seen, context, page in loading:
        try:
            page.wait_for_selector("body[data-charts-rendered]", state="attached", timeout=90_000)
            seen.claimed = int(page.get_attribute("body", "data-charts") or "-1")
            seen.rendered = page.evaluate(RENDERED_CHARTS)
            seen.title = page.title()
        except Exception as exc:  # one broken report fails its own test only
            seen.failure = f"{type(exc).__name__}: {exc}"
        finally:
            context.close()
        results[checkpoint] = seen
    return results


def meta(text: str, name: str) -> str:
    marker = f'<meta name="{name}" content="'
    start = text.index(marker) + len(marker)
    return text[start : text.index('"', start)]


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint", [pytest.param(p, id=sample_id(p)) for p in format_samples()])
def test_report_renders_offline(opened: dict[str, Opened], checkpoint: str) -> None:
    seen = opened[checkpoint]
    assert seen.failure == ""
    assert seen.claimed >= 10, "every report has the batch charts and at least one store's"
    assert seen.rendered == seen.claimed
    assert int(meta(seen.text, "stateglass-charts")) == seen.claimed
    assert [u for u in seen.requests if not u.startswith(LOCAL_SCHEMES)] == []
    assert seen.errors == []
    assert os.path.basename(checkpoint) in seen.title
    # Nothing to fetch: plotly.js is inline, as are the styles (no src, no link, no font):
    # config, templates, figures, packed plotly.js and the script that unpacks and draws.
    assert "<script src" not in seen.text and "<link" not in seen.text
    assert "@font-face" not in seen.text and seen.text.count("<script") == 5
