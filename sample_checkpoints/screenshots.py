"""Take the README's screenshots of the dashboard on the demo stories (``docs/screenshots/``).

Starts ``stateglass dashboard`` on a fresh temporary database of ``sample_checkpoints/demo``,
``spark-4.3/tws-rocks-cl``, ``spark-4.2/repart-agg-up-cl`` and the DynamoDB sample (with the
demo's event log and ``demo.toml``, through ``dynamodb/demo.py dashboard`` as ``make run``
does), visits every page in Debian's Chromium through Playwright, writes one PNG per shot,
then stops the server. The shots (page, story, what is selected) are fixed in :data:`SHOTS`,
so a re-run after a merge redraws the same pictures with the code of the day.

Usage (from the repository root, after ``make install``)::

    .venv/bin/python sample_checkpoints/screenshots.py
    .venv/bin/python sample_checkpoints/screenshots.py --out /tmp/shots --port 8765
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEMO = HERE / "demo"
EVENTLOGS = HERE / "eventlogs" / "demo"
CONFIG = HERE / "demo.toml"
# The transformWithState story is a version-tagged sample, shown beside the demo.
TWS = HERE / "spark-4.3" / "tws-rocks-cl"
# A checkpoint Spark 4.2 repartitioned (3 → 5 partitions at batch 3), for its own shots.
REPARTITIONED = HERE / "spark-4.2" / "repart-agg-up-cl"
# Runs the dashboard with moto serving the DynamoDB sample (``make run`` does the same).
DYNAMODB_DEMO = HERE / "dynamodb" / "demo.py"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDTH = 1400
TIMEOUT_MS = 120_000


@dataclass(frozen=True)
class Shot:
    """One PNG: a page, the demo story picked in the sidebar, and how much of it to keep."""

    file: str
    page: str  # Streamlit url_path ("" for the default page, the Overview), and a query string
    story: str | None = None  # None: the page's default (Overview shows every story)
    store: str | None = None  # text typed into the "Operator / store" select
    height: int = 1400  # viewport height: Streamlit scrolls inside its main block
    scroll_to: str | None = None  # text of a heading to bring to the top first
    charts: int = 0  # Plotly charts to wait for


# The SQL page's shot: a question no other page answers, on the skewed join of the demo.
JOIN_SIDES = """SELECT coalesce(l.key, r.key).field0 AS ad_id,
       l.value.value AS impressions_held, r.value.value AS clicks_held
FROM skewed_join.op0_left_keytonumvalues AS l
FULL OUTER JOIN skewed_join.op0_right_keytonumvalues AS r ON l.key = r.key
ORDER BY impressions_held DESC NULLS LAST"""

SHOTS = (
    Shot("overview.png", "", height=1500, charts=1),
    Shot("health.png", "health", "unbounded-state", height=1300),
    Shot("query.png", "query", "late-rows", height=1600, charts=3),
    Shot(
        "query_progress.png",
        "query",
        "late-rows",
        height=1100,
        scroll_to="What Spark reported",
        charts=3,
    ),
    Shot("state.png", "state", "skewed-join", "left-keyWithIndexToValue", 1900, charts=3),
    Shot(
        "state_progress.png",
        "state",
        "late-rows",
        height=1100,
        scroll_to="What Spark reported",
        charts=3,
    ),
    Shot("browse.png", "browse", "skewed-join", "left-keyWithIndexToValue", 1200),
    Shot("diff.png", "diff", "unbounded-state", height=1200),
    Shot("key_history.png", "key-history", "tws-rocks-cl", height=1300),
    Shot("state_repartitioned.png", "state", "repart-agg-up-cl", height=1900, charts=3),
    Shot("health_repartitioned.png", "health", "repart-agg-up-cl", height=1300),
    Shot("dynamodb_state.png", "state", "dynamodb-agg", height=1900, charts=3),
    Shot("sql.png", "sql?" + urlencode({"q": JOIN_SIDES}), "skewed-join", height=1900, charts=1),
)


def start_dashboard(db: Path, port: int) -> subprocess.Popen[bytes]:
    """``stateglass dashboard`` on the demo, as ``make run`` starts it (the DynamoDB sample
    served by moto beside the others), on 127.0.0.1:port."""
    command = [
        *[sys.executable, str(DYNAMODB_DEMO), "dashboard", "--workdir", str(db.parent), "--"],
        *[str(DEMO), str(TWS), str(REPARTITIONED)],
        *["--db", str(db), "--port", str(port), "--headless"],
        *["--progress", str(EVENTLOGS), "--config", str(CONFIG)],
    ]
    # Its own process group: the server and the watcher it starts stop together.
    return subprocess.Popen(command, cwd=ROOT, start_new_session=True)


def wait_serving(server: subprocess.Popen[bytes], url: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"the dashboard exited with status {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit(f"the dashboard did not answer on {url} within {timeout_s:.0f} s")


def stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def settle(page: Any) -> None:
    """Wait until Streamlit has finished running the page's script."""
    page.wait_for_selector('[data-testid="stApp"]')
    page.wait_for_timeout(500)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
        timeout=TIMEOUT_MS,
    )
    page.wait_for_timeout(800)


def choose(page: Any, label: str, text: str) -> None:
    """Type ``text`` into the sidebar select labelled ``label`` and take the first match."""
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(
        has_text=label
    )
    box.first.click()
    page.keyboard.type(text)
    page.keyboard.press("Enter")
    settle(page)
    # No focus ring on the select in the picture.
    page.evaluate("() => document.activeElement && document.activeElement.blur()")


def charts_drawn(page: Any, at_least: int) -> None:
    drawn = (
        "[...document.querySelectorAll('.js-plotly-plot')]"
        ".filter(p => p.querySelector('.main-svg')).length"
    )
    page.wait_for_function(f"() => {drawn} >= {at_least}", timeout=TIMEOUT_MS)


def take(page: Any, url: str, shot: Shot, out: Path) -> None:
    page.set_viewport_size({"width": WIDTH, "height": shot.height})
    page.goto(f"{url}/{shot.page}")
    settle(page)
    if shot.story:
        choose(page, "Checkpoint", shot.story)
    if shot.store:
        choose(page, "Operator / store", shot.store)
    if shot.charts:
        charts_drawn(page, shot.charts)
    if shot.scroll_to:
        page.get_by_text(shot.scroll_to).first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(3000)  # Plotly's and the data grids' last layout pass (a canvas)
    page.screenshot(path=str(out / shot.file))
    print(f"wrote {out / shot.file}", flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"), help="PNG folder")
    parser.add_argument("--port", type=int, default=8765, help="dashboard port (127.0.0.1)")
    parser.add_argument("--only", nargs="*", default=[], help="file names of the shots to take")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    shots = [s for s in SHOTS if not args.only or s.file in args.only]
    url = f"http://127.0.0.1:{args.port}"
    tmp = Path(tempfile.mkdtemp(prefix="stateglass-shots-"))
    server = start_dashboard(tmp / "demo.duckdb", args.port)
    try:
        wait_serving(server, url)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": WIDTH, "height": 1200})
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            try:
                for shot in shots:
                    take(page, url, shot, out)
            finally:
                context.close()
                browser.close()
    finally:
        stop(server)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
