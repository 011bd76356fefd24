"""The daily-use findings in a real browser: one dashboard, one database collected from every
checkpoint the findings need (copies of samples made here, and real queries run here).

- three copies of a sample under one long common prefix are told apart in the picker;
- a transformWithState store's rows per state variable equal ``stateglass state --state-var``;
- the repartition planner offers `stateglass rewrite` where Spark cannot repartition (HDFS);
- the Diff page's two versions live in the URL: a pasted link restores them;
- a complete-mode session window without a watermark is a ``state_leak`` WARN on Health;
- a socket source's input is shown as offset steps, never as a rate source's seconds.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from stateglass.app.cli import main
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.app.test_browser import (
    CHROMIUM,
    TIMEOUT_MS,
    _open,
    chromium_tab,
    dashboard_server,
)
from tests.app.test_unknown_sources import _socket_query
from tests.conftest import SAMPLES, spark_conf
from tests.eviction.conftest import CONF, SCHEMA, _start, _write

pytestmark = [
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason="Debian's chromium is not installed (.ci/run installs it)",
    ),
    pytest.mark.spark,
]
PREFIX = "team-analytics-prod-eu-west-1"
COPIES = ("orders-a", "orders-b", "orders-c")
TWS = SAMPLES / "spark-4.3" / "tws-rocks-cl"
HDFS_SAMPLE = SAMPLES / "spark-4.3" / "agg-hdfs"


@dataclass(frozen=True)
class Findings:
    """The dashboard's URL, the browser tab, and each checkpoint's recorded path."""

    url: str
    page: Any
    paths: dict[str, str]


def _session_window_no_watermark(spark: Any, base: Path) -> Path:
    """A session window counted in complete mode without a watermark (the only mode Spark
    allows then): its sessions can never close."""
    from pyspark.sql import functions as F

    src = _write(base / "src")

    def build() -> Any:
        stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
        return stream.groupBy(F.session_window("ts", "2 minutes"), "k").count()

    with spark_conf(spark, CONF):
        query = _start(base / "session", "complete", build)
    query.awaitTermination()
    return base / "session"


@pytest.fixture(scope="module")
def findings(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Findings]:
    base = tmp_path_factory.mktemp("findings")
    _socket_query(spark, base / "socket")
    paths = {
        "session": str(_session_window_no_watermark(spark, base)),
        "socket": str(base / "socket"),
    }
    db = Database(str(base / "h.duckdb"))
    paths = {name: scan_checkpoint(db, path).checkpoint for name, path in paths.items()}
    for name in COPIES:
        cp = base / "x" / PREFIX / name / "checkpoint"
        shutil.copytree(HDFS_SAMPLE, cp)
        paths[name] = scan_checkpoint(db, str(cp)).checkpoint
    paths["tws"] = scan_checkpoint(db, str(TWS)).checkpoint
    with dashboard_server(db.path) as url, chromium_tab() as page:
        yield Findings(url, page, paths)


def _at(findings: Findings, page: str, name: str, **params: str) -> str:
    query = "&".join(
        f"{k}={quote(v, safe='')}"
        for k, v in {"checkpoint": findings.paths[name], **params}.items()
    )
    return f"{findings.url}/{page}?{query}"


def test_the_picker_tells_checkpoints_with_one_long_prefix_apart(findings: Findings) -> None:
    page = findings.page
    _open(page, _at(findings, "query", "orders-b"))
    picker = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').first
    assert picker.locator('input[role="combobox"]').input_value() == "orders-b/checkpoint"
    # The full path is under the picker, where it wraps.
    page.locator('[data-testid="stSidebar"]').get_by_text(
        findings.paths["orders-b"]
    ).first.wait_for()
    picker.click()
    options = page.locator('[role="option"]')
    options.first.wait_for()
    shown = [options.nth(i).inner_text() for i in range(options.count())]
    page.keyboard.press("Escape")
    names = [next(s for s in shown if name in s) for name in COPIES]
    assert len(set(names)) == 3, shown
    # The common prefix is dropped: what tells them apart is not cut off by it.
    assert not any(PREFIX in n for n in names), names


def _cli_rows(checkpoint: str, *args: str) -> int:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["state", checkpoint, *args]) == 0
    return sum(1 for line in out.getvalue().splitlines() if line.strip())


def test_state_page_counts_rows_per_state_variable_as_the_cli(findings: Findings) -> None:
    page = findings.page
    _open(page, _at(findings, "state", "tws"))
    for var in ("stats", "by_kind", "recent"):
        metric = page.locator('[data-testid="stMetric"]', has_text=f"{var} rows").first
        metric.wait_for(timeout=TIMEOUT_MS)
        shown = int(metric.inner_text().split()[-1].replace(",", ""))
        assert shown == _cli_rows(findings.paths["tws"], "--state-var", var), var
    timers = page.locator('[data-testid="stMetric"]', has_text="timers rows").first
    assert int(timers.inner_text().split()[-1]) == _cli_rows(findings.paths["tws"], "--read-timers")


def test_the_planner_offers_rewrite_where_spark_cannot_repartition(findings: Findings) -> None:
    # Spark refuses an HDFS-provider checkpoint; stateglass rewrite can, so the planner offers it.
    page = findings.page
    _open(page, _at(findings, "state", "orders-a", tab="Repartition"))
    page.get_by_text("does not apply: a store uses the HDFS state store provider").first.wait_for()
    command = page.locator('[data-testid="stCode"]', has_text="--partitions").first
    command.wait_for()
    assert "--partitions 8" in command.inner_text()
    assert page.get_by_role("button", name="Plan").count() == 1


def _diff_heading(page: Any) -> str:
    heading = page.locator("h3", has_text="→").first
    heading.wait_for(timeout=TIMEOUT_MS)
    return str(heading.inner_text())


def test_a_pasted_diff_url_restores_its_two_versions(findings: Findings) -> None:
    page = findings.page
    _open(page, _at(findings, "diff", "tws", **{"from": "3", "batch": "7"}))
    assert "batch 3" in _diff_heading(page) and "batch 7" in _diff_heading(page)
    # The address bar holds them, so the link can be pasted again.
    assert "from=3" in page.url and "batch=7" in page.url


def test_a_session_window_without_a_watermark_is_a_state_leak(findings: Findings) -> None:
    page = findings.page
    _open(page, _at(findings, "health", "session"))
    row = page.locator("tr", has_text="State leak").first
    row.wait_for(timeout=TIMEOUT_MS)
    assert "WARN" in row.inner_text(), row.inner_text()
    # Said in full above the table, where the table cuts it.
    page.locator('[data-testid="stAlert"]', has_text="State leak").first.wait_for()


def test_a_socket_source_is_not_labelled_as_a_rate_source(findings: Findings) -> None:
    page = findings.page
    _open(page, _at(findings, "query", "socket"))
    # Plotly draws after the script ends: wait for the input chart itself, then read its SVG
    # text (the page's caption names every unit, so the body proves nothing).
    chart = page.locator(".js-plotly-plot", has_text="Input per batch").first
    chart.wait_for(timeout=TIMEOUT_MS)
    drawn = str(chart.text_content())
    assert "offset steps" in drawn, drawn
    assert "rate" not in drawn.lower(), drawn
