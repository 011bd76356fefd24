"""One clock in a real browser: on a checkpoint copied with new file times, the Overview card's
age, the ``stalled_query`` finding and the Query page agree on Spark's clock, say once that the
file times look copied, show no duration made of copy times, and count "not judged" apart."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.cli import main
from stateglass.parsers.units import fmt_age
from tests.app.test_browser import (
    CHROMIUM,
    TIMEOUT_MS,
    _open,
    chromium_tab,
    dashboard_server,
)
from tests.conftest import SAMPLES

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (.ci/run installs it)"
)
COPIED = "file times look copied and are not used"


@pytest.fixture(scope="module")
def copied(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A database of one sample copied as ``cp -r`` copies it: every file time is now."""
    base = tmp_path_factory.mktemp("clock")
    cp = base / "orders-copy"
    shutil.copytree(SAMPLES / "spark-4.3" / "agg-hdfs", cp)
    now = time.time()
    for f in [cp, *cp.rglob("*")]:
        os.utime(f, (now, now))
    db = str(base / "h.duckdb")
    assert main(["collect", str(cp), "--db", db]) == 0
    return db, cp


@pytest.fixture(scope="module")
def tab(copied: tuple[str, Path]) -> Iterator[tuple[Any, str]]:
    with dashboard_server(copied[0]) as url, chromium_tab() as page:
        yield page, url


def _last_batch_time(cp: Path) -> datetime:
    last = max(int(f.name) for f in (cp / "offsets").iterdir() if f.name.isdigit())
    meta = json.loads((cp / "offsets" / str(last)).read_text().split("\n")[1])
    return datetime.fromtimestamp(meta["batchTimestampMs"] / 1000, tz=UTC)


def test_card_finding_and_query_page_agree_on_spark_clock(
    tab: tuple[Any, str], copied: tuple[str, Path]
) -> None:
    page, url = tab
    ran = _last_batch_time(copied[1])
    # Days ago: the age reads the same on the card and in the finding, a minute apart.
    age = fmt_age((datetime.now(UTC) - ran).total_seconds())

    _open(page, f"{url}/overview")
    body = page.inner_text("body")
    assert "last batch ran" in body and age in body
    assert body.count(COPIED) == 1  # said once, on the card
    assert "not judged" in body
    assert "no commit for" not in body

    _open(page, f"{url}/health")
    # The findings' table can be drawn after the script's run is over: wait for its row
    # rather than reading the page once.
    page.get_by_text("no query writes to a copy", exact=False).first.wait_for(timeout=TIMEOUT_MS)
    body = page.inner_text("body")
    row = next(line for line in body.splitlines() if "no query writes to a copy" in line)
    assert f"{ran:%Y-%m-%d %H:%M:%S} UTC, Spark's batchTimestampMs" in row and age in row
    assert "no commit for" not in body
    # "not judged" counted apart: five progress rules and the stall.
    metric = page.locator('[data-testid="stMetric"]', has_text="not judged")
    assert metric.inner_text().split()[-1] == "6"
    ok = page.locator('[data-testid="stMetric"]', has_text="rules OK")
    assert int(ok.inner_text().split()[-1]) == len(_rules()) - 6

    _open(page, f"{url}/query")
    body = page.inner_text("body")
    assert body.count(COPIED) == 1
    median = page.locator('[data-testid="stMetric"]', has_text="median duration").inner_text()
    assert re.search(r"\bn/a\b", median), median
    # The duration chart draws no copy-time bars. Plotly draws after the script ends: wait for
    # the chart's own text rather than reading the page once.
    page.get_by_text("No duration known", exact=False).first.wait_for(timeout=TIMEOUT_MS)


def _rules() -> list[str]:
    from stateglass.app.analysis.health import RULES

    return list(RULES)
