"""The fix story end to end, in a real browser: the demo's leaking sample -> the Health page's
Plan a fix -> its command's dry run -> ``--apply`` -> Spark restarts on DST -> ``check`` OK.

``demo/leaking-windows`` is a windowed average written in complete output mode, which never
evicts: ``state_leak`` warns about the windows the watermark has passed. The command is read
from the page, not rebuilt here, so the test breaks if the page offers one that does not work.
"""

from __future__ import annotations

import io
import json
import os
import shlex
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from stateglass.app.cli import main
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.app.test_browser import CHROMIUM, TIMEOUT_MS, _open, chromium_tab, dashboard_server
from tests.conftest import SAMPLES, spark_conf
from tests.rewrite.spark_runs import Run, run_query

pytestmark = [
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason="Debian's chromium is not installed (.ci/run installs it)",
    ),
    pytest.mark.spark,
]
STORY = SAMPLES / "demo" / "leaking-windows"
CONFIG = str(SAMPLES / "demo.toml")


@dataclass(frozen=True)
class Story:
    """The command the Health page offers, and where its DST goes."""

    command: list[str]
    dst: Path
    panel_dry_run: str  # the panel's own dry run, asked for on the page


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        code = main(list(args))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    base = tmp_path_factory.mktemp("fix-story")
    db = Database(str(base / "h.duckdb"))
    checkpoint = scan_checkpoint(db, str(STORY)).checkpoint
    url_path = f"health?checkpoint={quote(checkpoint, safe='')}"
    with dashboard_server(db.path) as url, chromium_tab() as page:
        _open(page, f"{url}/{url_path}")
        page.get_by_text("Plan a fix:").first.click()
        code = page.locator('[data-testid="stCode"]', has_text="--drop-keys").first
        code.wait_for(timeout=TIMEOUT_MS)
        text = str(code.inner_text())
        page.get_by_role("button", name="Dry run here").first.click()
        shown = page.locator('[data-testid="stCode"]', has_text="keys removed per partition")
        shown.first.wait_for(timeout=TIMEOUT_MS)
        panel = str(shown.first.inner_text())
    words = shlex.split(text.replace("\\\n", " "))
    assert words[:3] == ["stateglass", "rewrite", checkpoint], words
    dst = base / "fixed"
    return Story([*words[1:3], str(dst), *words[4:]], dst, panel)


def _restart(spark: Any, cp: Path, source: Path) -> None:
    """The story's query, on ``cp``, for one more batch of readings, in update mode (the fix
    of the query itself: complete mode never evicts)."""
    from pyspark.sql import functions as F

    source.mkdir(parents=True)
    rows = [
        {"sensor": f"sensor-{i % 4:02d}", "ts": 1_704_067_200 + 8 * 300 + i * 30, "value": 1.0}
        for i in range(8)
    ]
    (source / "008.json").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def build(src: Path) -> Any:
        # A glob: Spark takes a plain folder as the base path of every file its source log
        # lists, and the demo's input folder (a temporary one) is gone.
        schema = "sensor STRING, ts BIGINT, value DOUBLE"
        stream = spark.readStream.schema(schema).json(f"{src}/*.json")
        return (
            stream.withColumn("event_time", F.timestamp_seconds("ts"))
            .withWatermark("event_time", "10 minutes")
            .groupBy(F.window("event_time", "10 minutes"), "sensor")
            .agg(F.count(F.lit(1)).alias("n"), F.avg("value").alias("avg_value"))
        )

    with spark_conf(spark, {"spark.sql.shuffle.partitions": "2"}):
        run_query(spark, Run(build, source, cp, {}, mode="update"))


def test_the_health_page_fix_removes_the_leak_and_spark_runs_on(
    story: Story, spark: Any, tmp_path: Path
) -> None:
    code, before = _cli("check", str(STORY), "--config", CONFIG)
    assert code == 1 and "state_leak" in before, before

    code, dry = _cli(*story.command)
    assert code == 0, dry
    assert "dry run: nothing written" in dry and not story.dst.exists()
    edit = next(line for line in dry.splitlines() if line.startswith("edit 0/default:"))
    removed = int(edit.split(": ", 1)[1].split(" of ", 1)[0])
    assert removed > 0, dry
    assert "rows removed:" in dry and '"window"' in dry, dry
    # The panel showed the same plan: the same keys, bytes and rows.
    assert dry.split("\nedit ", 1)[1].split("\ndry run:")[0] in story.panel_dry_run

    code, applied = _cli(*story.command, "--apply")
    assert code == 0 and f"wrote {story.dst}" in applied, applied
    code, after = _cli("check", str(story.dst), "--config", CONFIG)
    assert code == 0, after

    _restart(spark, story.dst, tmp_path / "input")
    assert (story.dst / "commits" / "8").exists()  # Spark ran a batch on DST
    code, restarted = _cli("check", str(story.dst), "--config", CONFIG)
    assert code == 0, restarted
