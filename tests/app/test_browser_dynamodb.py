"""`make run`'s DynamoDB path in real Chromium: ``demo.py dashboard`` starts moto's DynamoDB on
127.0.0.1 with the sample's tables, the dashboard collects and serves the sample through the
AWS chain, and everything stops with the dashboard, the dummy credentials written nowhere.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.app.test_browser import (
    CHROMIUM,
    _charts_rendered,
    _footer,
    _open,
    chromium_tab,
    wait_serving,
)
from tests.conftest import SAMPLES
from tests.remote.servers import free_port

DEMO = SAMPLES / "dynamodb" / "demo.py"
SECRETS = ("stateglass-demo-key-id", "stateglass-demo-secret")

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (.ci/run installs it)"
)


@dataclass
class Demo:
    url: str
    proc: subprocess.Popen[bytes]
    base: Path

    def output(self) -> str:
        return "".join((self.base / n).read_text(errors="replace") for n in ("out", "err"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    base = tmp_path_factory.mktemp("dynamodb-demo")
    port = free_port()
    args = [sys.executable, str(DEMO), "dashboard", "--workdir", str(base / "work"), "--"]
    args += ["--db", str(base / "demo.duckdb"), "--port", str(port), "--headless"]
    # No AWS settings of the test session: the demo brings its own.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with open(base / "out", "wb") as out, open(base / "err", "wb") as err:
        proc = subprocess.Popen(args, stdout=out, stderr=err, env=env)
    running = Demo(f"http://127.0.0.1:{port}", proc, base)
    try:
        wait_serving(running.url, proc, running.output, timeout_s=120)
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def page(demo: Demo) -> Iterator[Any]:
    with chromium_tab(height=1600) as tab:
        yield tab


@pytest.mark.slow
def test_state_and_browse_pages_on_dynamodb_state(page: Any, demo: Demo, tmp_path: Path) -> None:
    _open(page, f"{demo.url}/state")
    assert _charts_rendered(page, 3) >= 3
    assert "dynamodb-agg" in page.inner_text("body")
    page.screenshot(path=str(tmp_path / "state.png"))
    # The provider's class is named where it matters, in the restart cost's tab.
    _open(page, f"{demo.url}/state?tab=Restart")
    page.get_by_text("stateglass.dynamo.DynamoStateStoreProvider").first.wait_for()
    _open(page, f"{demo.url}/browse")
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    assert "Rows 1–12 of 12 at batch 4 · version 5" in _footer(page)


def test_the_demo_stops_moto_with_the_dashboard_and_writes_no_secret(demo: Demo) -> None:
    """Last in this module: it stops the demo."""
    first = demo.output().splitlines()[0]
    assert first.startswith("DynamoDB sample: moto's DynamoDB on http://127.0.0.1:"), first
    host, port = first.rsplit("/", 1)[-1].split(":")
    demo.proc.send_signal(signal.SIGTERM)
    assert demo.proc.wait(30) is not None
    with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=2):
        pass
    written = [demo.base / "demo.duckdb", *(p for p in demo.base.rglob("*") if p.is_file())]
    for path in written:
        data = path.read_bytes()
        assert not any(s.encode() in data for s in SECRETS), path
