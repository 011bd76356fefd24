"""Key history in a real browser (Debian's Chromium): a key the watermark evicted is found in
an older retained version, with the batch that removed it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.app.test_browser import CHROMIUM, TIMEOUT_MS, _open, _settle, chromium_tab
from tests.app.test_browser import dashboard_server as _server
from tests.conftest import SAMPLES

AGG = str(SAMPLES / "spark-4.3" / "agg-hdfs")

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (.ci/run installs it)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = Database(str(tmp_path_factory.mktemp("key-history") / "history.duckdb"))
    scan_checkpoint(db, AGG)
    with _server(db.path) as url:
        yield url


def test_an_evicted_key_is_found_with_its_removal_batch(server: str) -> None:
    tab: Any
    with chromium_tab() as tab:
        _open(tab, f"{server}/key-history")
        box = tab.get_by_label("Key contains", exact=True)
        box.fill("T00:00:00.000Z")
        box.press("Enter")
        tab.get_by_text("removed at batch 5 (version 6)").first.wait_for(timeout=TIMEOUT_MS)
        _settle(tab)
        body = tab.inner_text("body")
        assert "No key at batch 11 · version 12 contains" in body
        assert "batch 4 · version 5, the newest retained version that holds one" in body
