"""The fix story end to end, in a real browser (Debian's Chromium), on the demo's leaking
sample (``sample_checkpoints/demo/complete-mode``: windowed averages with a watermark written
in complete output mode, which never evicts).

The Health page warns of a state leak and its *Plan a fix* panel gives a command; the
command, as the page shows it, is run: its dry run lists the windows it removes and writes
nothing; with ``--apply`` it writes DST. The story's query restarts on DST in update mode
(which evicts) for two more batches, and ``stateglass check`` says OK on DST where it warned on
the source. The README's *Fix the state* is the same walk-through."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import pytest

from stateglass.app.cli import main
from stateglass.parsers.logs import batch_id_of, parse_file_source_log
from tests.app.test_browser import CHROMIUM, _open, chromium_tab, dashboard_server
from tests.conftest import spark_conf

SAMPLES = Path(__file__).resolve().parents[2] / "sample_checkpoints"
DEMO_CONFIG = str(SAMPLES / "demo.toml")

pytestmark = [
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason="Debian's chromium is not installed (.ci/run installs it)",
    ),
    pytest.mark.spark,
]


@dataclass(frozen=True)
class Story:
    checkpoint: Path
    command: str  # as the Plan a fix panel shows it


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    # A copy: the command writes its destination beside the source.
    cp = tmp_path_factory.mktemp("fix-story") / "complete-mode"
    shutil.copytree(SAMPLES / "demo" / "complete-mode", cp)
    db = str(cp.parent / "history.duckdb")
    assert main(["collect", str(cp), "--db", db]) == 0
    with dashboard_server(db) as url, chromium_tab() as page:
        _open(page, f"{url}/health?checkpoint={quote(str(cp), safe='')}")
        panel = page.locator('[data-testid="stExpander"]').filter(has_text="Plan a fix")
        panel.get_by_text("Plan a fix").click()
        code = panel.locator('[data-testid="stCode"] code')
        code.wait_for()
        yield Story(cp, code.inner_text().strip())


def _readings(batch: int) -> list[dict[str, Any]]:
    """Later readings than the sample's (its event time ended before 00:50)."""
    return [
        {"sensor": f"sensor-{i % 4:02d}", "ts": 1704070800 + 600 * batch + 60 * i, "value": i}
        for i in range(8)
    ]


def _input_directory(cp: Path) -> Path:
    """The directory the sample's file source read (its log names each file): a restart reads
    the same one. The sample's own files were removed after it ran."""
    log = cp / "sources" / "0"
    last = max(log.iterdir(), key=lambda f: batch_id_of(f.name) or -1)
    *_, entry = parse_file_source_log(last.read_bytes())
    return Path(urlparse(entry.path).path).parent


def _restart(spark: Any, cp: Path, inputs: Path) -> None:
    """The story's query (``sensor_windows``) on ``cp`` in update mode, over ``inputs``."""
    from pyspark.sql import functions as F

    events = (
        spark.readStream.schema("sensor STRING, ts BIGINT, value DOUBLE")
        .option("maxFilesPerTrigger", 1)
        .json(str(inputs))
        .withColumn("event_time", F.timestamp_seconds("ts"))
        .withWatermark("event_time", "10 minutes")
    )
    query = (
        events.groupBy(F.window("event_time", "10 minutes"), "sensor")
        .agg(F.count(F.lit(1)).alias("n"), F.avg("value").alias("avg_value"))
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
    )
    with spark_conf(spark, {"spark.sql.shuffle.partitions": "2"}):
        query.start().awaitTermination()


def test_plan_a_fix_gives_a_command_whose_apply_spark_restarts_on(
    story: Story, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    args = shlex.split(story.command)
    assert args[:3] == ["stateglass", "rewrite", str(story.checkpoint)]
    assert "--drop-keys" in args and "--apply" not in args
    dst = Path(args[3])

    capsys.readouterr()
    assert main(args[1:]) == 0
    dry_run = capsys.readouterr().out
    assert "dry run: nothing written" in dry_run and not dst.exists()
    assert "keys removed" in dry_run and '"window":{"start":"2024-01-01T00:' in dry_run

    assert main([*args[1:], "--apply"]) == 0
    assert dst.is_dir()
    before = spark.read.format("statestore").load(str(dst)).count()

    # The story's own input directory, as a restart of the real query reads it; it may be
    # there already (the README's walk-through): only what this test made is removed.
    inputs = _input_directory(dst)
    missing = [d for d in (inputs, *inputs.parents) if not d.exists()]
    inputs.mkdir(parents=True, exist_ok=True)
    new_files = [inputs / f"restart-{os.getpid()}-{batch}.json" for batch in range(2)]
    try:
        for batch, path in enumerate(new_files):
            path.write_text("".join(json.dumps(row) + "\n" for row in _readings(batch)))
        _restart(spark, dst, inputs)
    finally:
        for path in new_files:
            path.unlink(missing_ok=True)
        if missing:
            shutil.rmtree(missing[-1])
    commits = sorted(int(p.name) for p in (dst / "commits").iterdir() if p.name.isdigit())
    # The sample ran batches 0-9; then one per new file (and one without data to evict).
    assert commits[:12] == list(range(12))
    assert spark.read.format("statestore").load(str(dst)).count() > 0 and before > 0

    capsys.readouterr()
    assert main(["check", str(story.checkpoint), "--config", DEMO_CONFIG]) == 1
    assert "WARN    state_leak" in capsys.readouterr().out
    status = main(["check", str(dst), "--config", DEMO_CONFIG])
    verdict = capsys.readouterr().out
    assert status == 0, verdict
    assert "OK      state_leak" in verdict and "worst: OK" in verdict
