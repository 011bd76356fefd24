"""``--engine spark`` keeps Spark's console clutter out of stderr: a collect that fails ends with
our one-line error, not with the progress bar of the stage that was running.

Spark draws the bar for a stage that runs longer than half a second (then every 200 ms), so
the probe's stage sleeps for one: with the bar on, stderr would hold ``[Stage 0:>`` lines.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.spark

PROBE = """
import sys, time
from stateglass.collectors.engines.spark import _session

spark = _session("local[1]")
assert spark.sparkContext.getConf().get("spark.ui.showConsoleProgress") == "false"
spark.sparkContext.parallelize([0], 1).map(lambda x: time.sleep(1.0) or x).collect()
print("stateglass: error: the last line", file=sys.stderr, flush=True)
spark.stop()
"""


@pytest.mark.slow
def test_a_long_stage_draws_no_progress_bar() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[Stage" not in proc.stderr, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[-1] == "stateglass: error: the last line", proc.stderr[-3000:]
