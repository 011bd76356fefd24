"""Markup in a checkpoint stays text: in every page, in the browser, and in both reports.

A real PySpark query writes its checkpoint into a directory named with a Markdown link and an
HTML image payload, groups by a column whose name and values carry them too, and aggregates
into fields named like scripts. The pages (``AppTest``), the Overview, Browse and the other
pages in Chromium, the HTML report in Chromium and the Markdown report must show the payloads
as text and never as a link, image or script.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from stateglass.app.dashboard.server import streamlit_command
from stateglass.app.escape import md
from stateglass.app.report import render_html, render_markdown
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.app.test_browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    SCRIPT_DONE,
    TIMEOUT_MS,
    _free_port,
    wait_serving,
)
from tests.conftest import write_batch_files

LINK = "[orders](https:evil.example)"
IMAGE = "<img src=x onerror=alert(1)>"
NAME = f"{LINK}{IMAGE}"
KEY_FIELD = "[k](https:evil.example)<img src=x onerror=alert(1)>"
COUNT_FIELD = "<script>alert(1)</script>"
SUM_FIELD = "[n](https:evil.example)"
KEY_VALUES = [f"[v{i}](https:evil.example)<img src=x onerror=alert({i})>" for i in range(3)]
PAGES = ["overview", "health", "query", "state", "browse", "diff", "key_history", "sql"]


@pytest.fixture(scope="module")
def hostile_checkpoint(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two micro-batches of a streaming aggregation, checkpointed under the payload name."""
    base = tmp_path_factory.mktemp("hostile")
    src = write_batch_files(
        base / "input",
        [[{"k": k, "n": batch * 10 + i} for i, k in enumerate(KEY_VALUES)] for batch in range(2)],
    )
    checkpoint = base / "team" / NAME
    stream = spark.readStream.schema("k STRING, n INT").option("maxFilesPerTrigger", 1)
    query = (
        stream.json(str(src))
        .selectExpr(f"k AS `{KEY_FIELD}`", "n")
        .groupBy(f"`{KEY_FIELD}`")
        .agg({"*": "count", "n": "sum"})
        .withColumnsRenamed({"count(1)": COUNT_FIELD, "sum(n)": SUM_FIELD})
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert (checkpoint / "state" / "0").is_dir(), "the query kept no state"
    return str(checkpoint)


@pytest.fixture(scope="module")
def hostile_db(hostile_checkpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("hostile-db") / "sg.duckdb")
    scan_checkpoint(Database(path), hostile_checkpoint)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STATEGLASS_DB", path)
        yield path


def test_the_payloads_reach_the_schema(hostile_db: str, hostile_checkpoint: str) -> None:
    """The test is only worth something if Spark kept the names as they are."""
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

    store = Checkpoint.open(hostile_checkpoint).stores()[0]
    assert store.key_schema is not None and store.value_schema is not None
    assert [f.name for f in store.key_schema.fields] == [KEY_FIELD]
    # An aggregation's state keeps its buffers' own names (count, sum): only the grouping
    # column's alias reaches the state schema; the output aliases reach the query's plan.


# --- what "stays text" means in Markdown and HTML ---------------------------------------------

_CODE_SPAN = re.compile(r"(?<![\\`])(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_MARKDOWN_MARKUP = {
    "link or image": re.compile(r"(?<!\\)\]\("),
    "raw HTML": re.compile(r"(?<!\\)<\s*/?\s*(img|script|a|iframe|svg)\b", re.I),
    "autolink": re.compile(r"(?<![\\/])\bhttps?:(?=//)|(?<!\\)\bwww\.(?=\w)|\w(?<!\\)@\w"),
}


# The app's own links between its pages (url_state.link): fixed text, every parameter
# percent-encoded, so a name inside one cannot close it or open another.
_OWN_LINK = re.compile(
    r"\[[\w .→-]+\]\((?:overview|health|query|state|browse|diff|key-history)\?[\w%.+=&~-]*\)"
)


def markdown_markup(text: str) -> list[str]:
    """What in ``text`` a CommonMark/GFM renderer would turn into a link, image or HTML
    (the app's own links between its pages left out)."""
    outside_code = _OWN_LINK.sub(" ", _CODE_SPAN.sub(" ", text))
    return [kind for kind, found in _MARKDOWN_MARKUP.items() if found.search(outside_code)]


def test_the_markdown_check_catches_raw_payloads() -> None:
    assert markdown_markup(f"**{NAME}**") == ["link or image", "raw HTML"]
    assert markdown_markup("see www.evil.example") == ["autolink"]
    assert markdown_markup(f"**{md(NAME)}** `{NAME}`") == []


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


# --- pages, as AppTest runs them --------------------------------------------------------------


def _page(name: str) -> None:
    import importlib

    from stateglass.app.dashboard import context

    context.live_status()
    importlib.import_module(f"stateglass.app.dashboard.views.{name}").render()


def _markdown_and_charts(at: AppTest) -> tuple[list[str], list[dict[str, Any]]]:
    """Every Markdown-rendered string of the page (bodies, labels, tooltips) and chart spec."""
    texts: list[str] = []
    charts: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ListFields"):
            kind = proto.DESCRIPTOR.name
            if kind == "PlotlyChart":
                charts.append(json.loads(proto.spec))
            elif kind != "Arrow":  # table cells are drawn as text on a canvas
                for field, value in proto.ListFields():
                    if field.name in ("body", "label", "help") and isinstance(value, str):
                        texts.append(value)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return texts, charts


@pytest.mark.parametrize("name", PAGES)
def test_pages_show_the_payloads_as_text(hostile_db: str, name: str) -> None:
    at = AppTest.from_function(_page, args=(name,), default_timeout=90)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    texts, charts = _markdown_and_charts(at)
    assert texts, "the page rendered nothing"
    bad = {t: markdown_markup(t) for t in texts if markdown_markup(t)}
    assert bad == {}
    for chart in charts:
        for text in _strings(chart):
            assert not re.search(r"<\s*(img|script|a)\b", text, re.I), text
    if name == "overview":
        assert any(md(NAME) in t for t in texts), "the card names the checkpoint"


def test_the_sql_page_shows_query_results_as_text(hostile_db: str, hostile_checkpoint: str) -> None:
    """The state's own rows (hostile keys and field names) in the SQL page's grid and chart."""
    from stateglass.app.dashboard.sql_link import QUERY_PARAM
    from stateglass.collectors.catalog.names import quoted, schema_names

    schema = schema_names([hostile_checkpoint])[hostile_checkpoint]
    at = AppTest.from_function(_page, args=("sql",), default_timeout=90)
    at.query_params[QUERY_PARAM] = (
        f"SELECT key.*, value.* FROM {quoted(schema)}.op0_default ORDER BY 1"
    )
    at.run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    grid = at.dataframe[-1].value
    assert sorted(grid[KEY_FIELD]) == KEY_VALUES
    texts, charts = _markdown_and_charts(at)
    assert {t: markdown_markup(t) for t in texts if markdown_markup(t)} == {}
    assert charts, "a numeric column is drawn"
    for chart in charts:
        for text in _strings(chart):
            assert not re.search(r"<\s*(img|script|a)\b", text, re.I), text


# --- reports ----------------------------------------------------------------------------------


def test_markdown_report_has_no_markup_from_the_checkpoint(
    hostile_db: str, hostile_checkpoint: str
) -> None:
    text = render_markdown(hostile_db, hostile_checkpoint)
    assert md(NAME) in text and md(KEY_FIELD) in text
    assert markdown_markup(text) == []
    # Schemas are code spans, which Markdown shows literally; everything else is escaped.
    outside_code = _CODE_SPAN.sub(" ", text)
    for raw in ("<img", "<script", "](https"):
        assert raw not in outside_code.replace("\\<", "").replace("\\]", "")


# --- the browser ------------------------------------------------------------------------------

_DOM_MARKUP = """() => ({
    links: [...document.querySelectorAll('a[href*="evil"], a[href^="mailto:"]')]
        .filter(a => !new RegExp('^(?:[a-z]+:[^?]*[/])?'
            + '(overview|health|query|state|browse|diff|key-history|sql)[?]')
            .test(a.getAttribute('href'))).length,
    images: document.querySelectorAll('img[src="x"]').length,
    onerror: document.querySelectorAll('[onerror]').length,
    scripts: [...document.querySelectorAll('script')]
        .filter(s => s.textContent.includes('alert(')).length,
    alerts: window.__alerts || 0,
})"""
NO_MARKUP = {"links": 0, "images": 0, "onerror": 0, "scripts": 0, "alerts": 0}


@pytest.fixture(scope="module")
def browser_page() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        # An alert(…) that ran would be counted, not shown.
        context.add_init_script("window.alert = () => { window.__alerts = (window.__alerts||0)+1 }")
        tab = context.new_page()
        tab.set_default_timeout(TIMEOUT_MS)
        yield tab
        context.close()
        browser.close()


@pytest.fixture(scope="module")
def hostile_server(hostile_db: str) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        # The command line ``stateglass dashboard`` runs: loopback, no usage statistics.
        streamlit_command(hostile_db, port, "127.0.0.1", headless=True),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        err = proc.stderr
        wait_serving(url, proc, lambda: err.read().decode() if err else "", timeout_s=90)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if proc.stderr:
            proc.stderr.close()


# What the page shows as text: its text, and the values of its inputs (a picked option).
_SHOWN_TEXT = (
    "(document.body.innerText + [...document.querySelectorAll('input')]"
    ".map(i => i.value).join(' '))"
)


def _settled(page: Any) -> None:
    page.wait_for_selector('[data-testid="stApp"]')
    # The script has run once the sidebar's picker or the Overview's card names the checkpoint.
    page.wait_for_function(f"(t) => {_SHOWN_TEXT}.includes(t)", arg=LINK, timeout=TIMEOUT_MS)
    page.wait_for_function(SCRIPT_DONE, timeout=TIMEOUT_MS)
    boxes = page.locator('[data-testid="stException"]')
    assert boxes.count() == 0, boxes.first.inner_text()


@pytest.mark.slow
@pytest.mark.parametrize("path", ["", "browse", "query", "state", "health", "key-history", "sql"])
def test_browser_shows_no_link_image_or_script(
    browser_page: Any, hostile_server: str, path: str
) -> None:
    browser_page.goto(f"{hostile_server}/{path}")
    _settled(browser_page)
    shown = browser_page.evaluate(f"() => {_SHOWN_TEXT}")
    # The payload is on the page, as text (the sidebar picker shows the checkpoint's name).
    assert NAME in shown
    assert browser_page.evaluate(_DOM_MARKUP) == NO_MARKUP


def test_html_report_in_the_browser_shows_no_markup(
    browser_page: Any, hostile_db: str, hostile_checkpoint: str, tmp_path: Path
) -> None:
    report = tmp_path / "report.html"
    report.write_text(render_html(hostile_db, hostile_checkpoint))
    browser_page.goto(report.as_uri())
    charts = int(browser_page.locator('meta[name="stateglass-charts"]').get_attribute("content"))
    browser_page.wait_for_function(
        f"() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}"
    )
    assert NAME in browser_page.inner_text("body")
    found = browser_page.evaluate(_DOM_MARKUP)
    # The report's own scripts (plotly.js, the chart specs) mention no alert(; data never runs.
    assert found == NO_MARKUP
